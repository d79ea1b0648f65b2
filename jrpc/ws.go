package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// ErrConnClosed is returned by Notify once the connection has ended.
var ErrConnClosed = errors.New("jrpc: connection closed")

// Notifier sends server-initiated notifications to one WebSocket client; it
// is how subscriptions reach their subscriber. Notify writes
// {"jsonrpc":"2.0","method":...,"params":...} through the connection's one
// writer, waiting at most until ctx ends for its turn; a peer that does not
// read within WSWriteTimeout is disconnected. Closed is closed when the
// connection ends, after which Notify returns ErrConnClosed.
type Notifier interface {
	Notify(ctx context.Context, method string, params json.RawMessage) error
	// NotifySubscriptions writes geth's eth_subscription notification of
	// each of notes, in order, a WebSocket message each,
	// {"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":id,"result":result}},
	// all of them in one write to the network where the network takes it.
	NotifySubscriptions(ctx context.Context, notes []SubscriptionNote) error
	// TryNotifySubscriptions is NotifySubscriptions that never waits: false,
	// and nothing written, when another write has the connection's turn
	// (or the WebSocket library is writing a ping, pong or close frame).
	// What the network does not take at once the connection sends in the
	// background, keeping the turn until it has (or WSWriteTimeout closed
	// the connection). A fan-out writes thousands of connections per block
	// this way without a goroutine each.
	TryNotifySubscriptions(notes []SubscriptionNote) (bool, error)
	// Disconnect closes the connection with a WebSocket close code and a
	// reason the client can read (at most 123 bytes), and ends every call
	// on it.
	Disconnect(code int, reason string)
	Closed() <-chan struct{}
	// AfterClose arranges for f to run in its own goroutine once the
	// connection ends, as context.AfterFunc does: no goroutine waits for it
	// meanwhile.
	AfterClose(f func())
}

var _ Notifier = (*wsConn)(nil)

type notifierKey struct{}

// NotifierFromContext returns the connection of a WebSocket call; false over
// HTTP, where the server cannot speak first.
func NotifierFromContext(ctx context.Context) (Notifier, bool) {
	n, ok := ctx.Value(notifierKey{}).(Notifier)
	return n, ok
}

// ContextWithNotifier returns ctx as a call on n's connection: how a
// subscription handler is driven without a WebSocket server.
func ContextWithNotifier(ctx context.Context, n Notifier) context.Context {
	return context.WithValue(ctx, notifierKey{}, n)
}

type replyKey struct{}

// reply collects the functions to run once a WebSocket message's answer has
// been written.
type reply struct {
	mu    sync.Mutex
	hooks []func()
}

// AfterReply runs f once the answer carrying the current WebSocket call has
// been written (or failed to be). A subscribe handler uses it to hold its
// first notification until the client has the subscription id. It returns
// false, and never runs f, when ctx is not a WebSocket call's: over HTTP
// nothing is pending.
func AfterReply(ctx context.Context, f func()) bool {
	r, ok := ctx.Value(replyKey{}).(*reply)
	if !ok {
		return false
	}
	r.mu.Lock()
	r.hooks = append(r.hooks, f)
	r.mu.Unlock()
	return true
}

func (r *reply) run() {
	r.mu.Lock()
	hooks := r.hooks
	r.hooks = nil
	r.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// wsConn is one WebSocket client. Its read loop runs in the HTTP handler's
// goroutine; each message is served in its own goroutine, at most WSInFlight
// at once; writes go one at a time.
type wsConn struct {
	s    *Server
	ch   *chainEntry
	ip   string // what the connection counts against in max_connections_per_ip
	conn *websocket.Conn
	sock *sock // the network under conn

	// The caller each message goes by: the Gate's answer to the upgrade,
	// then to req again after each reload (Readmit, reload.go).
	cl      atomic.Pointer[admitted]
	req     *http.Request // the upgrade: its headers and address, read only
	pathKey string
	gen     uint64 // Server.gateGen the caller was admitted under

	// ctx is the root of every call on the connection; cancel ends them all
	// when the connection ends.
	ctx    context.Context
	cancel context.CancelFunc

	slots      chan struct{}  // one per message in flight
	writeMu    chan struct{}  // the writer's turn; a channel so waiters can give up
	writeTimer *time.Timer    // closes the connection when a write outlasts WSWriteTimeout; guarded by writeMu
	wg         sync.WaitGroup // message goroutines, a pending write's flush and a Disconnect's close

	// mu guards ended and disconnecting: a Disconnect's close joins wg only
	// while serve has not begun waiting for it.
	mu            sync.Mutex
	ended         bool
	disconnecting bool

	pinger *wsPinger
	// The pinger must not mistake a paused reader (which reads no pongs) for a
	// dead peer; a peer that sent a message is alive.
	paused atomic.Bool
	pauses atomic.Uint64
	reads  atomic.Uint64
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, ch *chainEntry, id, key string) {
	// WebSocket has no preflight: the Gate checks the upgrade's Origin.
	gen := s.gateGen.Load()
	cl, ok := s.admit(w, r, ch, TransportWS, key)
	if !ok {
		return
	}
	ip := connIP(cl, r)
	if e, status := s.admitConn(ip); e != nil {
		if e.Code == CodeLimitExceeded {
			ch.metrics.rejected(limitConnections)
		}
		w.Header().Set("Retry-After", "1")
		writeHTTPError(w, status, e)
		return
	}
	hw := withSock(w)
	pinger := &wsPinger{}
	conn, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // the origin is the Gate's to check
		CompressionMode:    s.wsCompression(),
		OnPongReceived:     pinger.pong,
	})
	if err != nil {
		s.leaveConn(nil, ip) // Accept has answered the client
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "websocket upgrade",
			slog.String("chain", ch.name), slog.Any("err", err))
		return
	}
	// The library would close an oversize message's connection; venn answers
	// it with an error instead, so it reads the limit itself.
	conn.SetReadLimit(-1)

	c := &wsConn{
		s:       s,
		ch:      ch,
		ip:      ip,
		conn:    conn,
		sock:    hw.(*sockHijacker).sock, // an upgrade hijacks, and Accept found the sock's Hijack first
		req:     r,
		pathKey: key,
		gen:     gen,
		slots:   make(chan struct{}, s.lim().WSInFlight),
		writeMu: make(chan struct{}, 1),
		pinger:  pinger,
	}
	c.cl.Store(&admitted{Caller: cl})
	// The request context ends with this handler, which is the connection's
	// life; values (tracing, auth) carry over.
	ctx := context.WithValue(r.Context(), peerKey{}, peer(cl, TransportWS, r, id))
	ctx = withSkipCache(ctx, r.Header, false)
	ctx = ContextWithNotifier(ctx, c)
	c.ctx, c.cancel = context.WithCancel(ctx)
	defer c.cancel()
	// Writes run without a context (see write): ending the connection's
	// context must still end a write stuck on a peer that does not read.
	defer context.AfterFunc(c.ctx, func() { _ = c.conn.CloseNow() })()

	reason, stale := s.trackConn(c)
	if reason == "" && stale {
		if reason = c.readmit(); reason != "" {
			_ = c.conn.Close(readmitCloseCode, reason)
		}
	}
	if reason != "" {
		c.goAway(reason) // the frame was sent, if any: this ends the rest
		s.leaveConn(c, ip)
		return
	}
	s.metrics.wsConnOpened()
	defer s.metrics.wsConnClosed()
	defer s.leaveConn(c, ip)
	c.serve()
}

// connIP is the address a connection counts against for
// max_connections_per_ip: the Gate's client address (behind trusted
// proxies) when it works one out, the peer's otherwise; an IPv6 client's
// /64.
func connIP(cl Caller, r *http.Request) string {
	if cl != nil {
		if ip := cl.ClientIP(); ip.IsValid() {
			return AddrBucket(ip)
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return AddrBucket(netip.Addr{})
	}
	return AddrBucket(ap.Addr().Unmap())
}

// admitConn takes a connection slot for a client at ip, or says why there
// is none, with the HTTP status: 503 when venn is full or closing, 429
// when the client's address has its share.
func (s *Server) admitConn(ip string) (*Error, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing.Load():
		return errShuttingDown(), http.StatusServiceUnavailable
	case s.nconns >= s.lim().MaxConnections:
		return errTooManyConnections(s.lim().MaxConnections), http.StatusServiceUnavailable
	case s.connsByIP[ip] >= s.lim().MaxConnsPerIP:
		return errTooManyConnectionsFromIP(s.lim().MaxConnsPerIP), http.StatusTooManyRequests
	}
	s.nconns++
	s.connsByIP[ip]++
	s.connWG.Add(1)
	return nil, 0
}

// trackConn makes c one of the connections Shutdown (and Remove and
// Readmit) close; or it says why c must close at once: Shutdown has
// already taken its list, or a reload removed c's chain since the upgrade
// began. stale says a Readmit took its list since c was admitted: c must
// be admitted again by itself.
func (s *Server) trackConn(c *wsConn) (reason string, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing.Load():
		return shutdownReason, false
	case s.chains.Load().byName[c.ch.name] != c.ch:
		return chainRemovedReason, false
	}
	s.conns[c] = struct{}{}
	return "", s.gateGen.Load() != c.gen
}

// leaveConn gives back the slot admitConn took.
func (s *Server) leaveConn(c *wsConn, ip string) {
	s.mu.Lock()
	s.nconns--
	if s.connsByIP[ip]--; s.connsByIP[ip] <= 0 {
		delete(s.connsByIP, ip)
	}
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
}

// serve runs the connection until it ends, then stops and waits for
// everything it started.
func (c *wsConn) serve() {
	c.s.pings.join(c)
	err := c.readLoop()
	c.cancel() // calls of a closed connection have no one to answer
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.s.pings.leave(c)
	c.wg.Wait()
	_ = c.conn.CloseNow()
	if c.s.log.Enabled(c.ctx, slog.LevelDebug) {
		c.s.log.LogAttrs(c.ctx, slog.LevelDebug, "websocket closed",
			slog.String("chain", c.ch.name), slog.Any("err", err))
	}
}

func (c *wsConn) readLoop() error {
	limit := c.s.lim().MaxWSMessageBytes
	for {
		if err := c.acquire(); err != nil {
			return err
		}
		// Text and binary alike: both carry JSON from some client or other.
		_, r, err := c.conn.Reader(c.ctx)
		if err != nil {
			c.release()
			return err
		}
		msg, err := readLimited(r, 0, limit)
		if errors.Is(err, errTooLarge) {
			c.release()
			c.ch.metrics.rejected(limitWSMessage)
			answer := appendError(nil, nil, errMessageTooLarge(limit))
			if !discard(r, wsDiscardFactor*limit) {
				// Too much to read past: the client still gets the error,
				// then the close, so it learns why it was dropped.
				_ = c.write(c.ctx, answer)
				_ = c.conn.Close(websocket.StatusMessageTooBig, "message too big")
				return fmt.Errorf("discard oversize message: %w", err)
			}
			// Answered inline: the error is tiny and keeps order simple.
			if err := c.write(c.ctx, answer); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			c.release()
			return err
		}
		c.reads.Add(1)
		c.wg.Add(1)
		go c.serveMessage(msg)
	}
}

// discard reads the rest of a message, at most n bytes; false if there was
// more (or the read failed).
func discard(r io.Reader, n int64) bool {
	_, err := io.CopyN(io.Discard, r, n)
	return err == io.EOF
}

// acquire takes a slot for the next message. With every slot taken the read
// loop waits here and reads nothing, which pushes back on the client.
func (c *wsConn) acquire() error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	c.pauses.Add(1)
	c.paused.Store(true)
	defer c.paused.Store(false)
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

func (c *wsConn) release() { <-c.slots }

func (c *wsConn) serveMessage(msg []byte) {
	defer c.wg.Done()
	defer c.release()
	admitted := c.s.beginCalls()
	if admitted {
		defer c.s.endCalls() // after the write: Shutdown waits for the answer
	}
	r := &reply{}
	ctx := context.WithValue(c.ctx, replyKey{}, r)
	cl := c.cl.Load()
	if cl.peer != nil {
		ctx = context.WithValue(ctx, peerKey{}, cl.peer)
	}
	var start time.Time
	if c.s.onCall != nil {
		start = time.Now()
	}
	bp := c.s.getBuf()
	out, sv := c.s.serveMessage(ctx, c.ch, cl.Caller, msg, *bp, admitted)
	if cl.Caller != nil {
		charge(ctx, c.ch, cl.Caller, &sv, nil, nil)
	}
	if len(out) > 0 {
		if err := c.write(c.ctx, out); err != nil {
			c.s.log.LogAttrs(c.ctx, slog.LevelDebug, "websocket write",
				slog.String("chain", c.ch.name), slog.Any("err", err))
		}
	}
	*bp = out
	c.s.putBuf(bp)
	r.run()
	if c.s.onCall != nil {
		c.s.logCalls(ctx, c.ch, &sv, start, 0)
	}
}

// takeTurn waits for the writer's turn (writeMu), until ctx ends or the
// connection closes; whoever takes it gives it back.
func (c *wsConn) takeTurn(ctx context.Context) error {
	select {
	case c.writeMu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrConnClosed
	}
}

// write sends one message once it is the writer's turn (waiting until ctx
// ends). The write itself is bounded by WSWriteTimeout: a timer, reset for
// each write, closes the connection when it passes mid-write (a
// half-written frame cannot be taken back). The library gets a context
// without a deadline, which spares it arming a timeout per message: a
// subscription fan-out writes thousands of them per block.
func (c *wsConn) write(ctx context.Context, msg []byte) error {
	if err := c.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-c.writeMu }()
	c.armWriteTimer()
	err := c.conn.Write(context.Background(), websocket.MessageText, msg)
	return c.stopWriteTimer(err)
}

// armWriteTimer starts the WSWriteTimeout of a write; the caller has the
// writer's turn.
func (c *wsConn) armWriteTimer() {
	if c.writeTimer == nil {
		c.writeTimer = time.AfterFunc(c.s.lim().WSWriteTimeout, func() { _ = c.conn.CloseNow() })
	} else {
		c.writeTimer.Reset(c.s.lim().WSWriteTimeout)
	}
}

// stopWriteTimer ends the write armWriteTimer timed, whose error was err.
func (c *wsConn) stopWriteTimer(err error) error {
	if !c.writeTimer.Stop() && err == nil {
		err = errWriteTimeout // the timer fired as the write ended: the connection is closed
	}
	return err
}

var errWriteTimeout = errors.New("jrpc: websocket write timed out")

// Notify implements Notifier.
func (c *wsConn) Notify(ctx context.Context, method string, params json.RawMessage) error {
	if c.ctx.Err() != nil {
		return ErrConnClosed
	}
	bp := c.s.getBuf()
	defer c.s.putBuf(bp)
	*bp = appendNotification(*bp, method, params)
	if err := c.write(ctx, *bp); err != nil {
		if c.ctx.Err() != nil {
			return ErrConnClosed
		}
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// NotifySubscriptions implements Notifier.
func (c *wsConn) NotifySubscriptions(ctx context.Context, notes []SubscriptionNote) error {
	if c.ctx.Err() != nil {
		return ErrConnClosed
	}
	if err := c.takeTurn(ctx); err != nil {
		return err
	}
	defer func() { <-c.writeMu }()
	c.armWriteTimer()
	done, err := c.sock.writeNotes(notes, true)
	if err == nil && !done {
		err = c.sock.flush()
	}
	return c.notifyErr(c.stopWriteTimer(err))
}

// TryNotifySubscriptions implements Notifier.
func (c *wsConn) TryNotifySubscriptions(notes []SubscriptionNote) (bool, error) {
	if c.ctx.Err() != nil {
		return false, ErrConnClosed
	}
	select {
	case c.writeMu <- struct{}{}:
	default:
		return false, nil
	}
	done, err := c.sock.writeNotes(notes, false)
	if errors.Is(err, errSockBusy) {
		// The library is writing a control frame, which may wait for the
		// peer: the caller writes these later, in the writer's turn.
		<-c.writeMu
		return false, nil
	}
	if err != nil || done {
		<-c.writeMu
		return true, c.notifyErr(err)
	}
	// The network took part: the rest goes in the background, which keeps
	// the turn, so that what is written next queues behind it.
	if !c.goOwned(c.flushPending) {
		<-c.writeMu
		return true, ErrConnClosed
	}
	return true, nil
}

// flushPending sends what TryNotifySubscriptions left pending, in its
// turn, within WSWriteTimeout.
func (c *wsConn) flushPending() {
	defer func() { <-c.writeMu }()
	c.armWriteTimer()
	if err := c.stopWriteTimer(c.sock.flush()); err != nil {
		c.s.log.LogAttrs(c.ctx, slog.LevelDebug, "websocket write",
			slog.String("chain", c.ch.name), slog.Any("err", err))
		_ = c.conn.CloseNow()
		c.cancel()
	}
}

// notifyErr is what a notification's write error says to its caller. A
// write that failed leaves the connection unusable: it is closed, unless
// it is closing already (its close handshake runs its course).
func (c *wsConn) notifyErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errCloseSent):
		return ErrConnClosed
	}
	_ = c.conn.CloseNow()
	if c.ctx.Err() != nil {
		return ErrConnClosed
	}
	return fmt.Errorf("notify: %w", err)
}

// goOwned runs f in a goroutine serve waits for; false, and f never runs,
// once serve stopped waiting.
func (c *wsConn) goOwned(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	c.wg.Go(f)
	return true
}

// Disconnect implements Notifier. The close handshake runs in the
// background: the peer being disconnected is often one that does not read.
// The connection owns it: serve waits for it, and ending the connection
// cuts it short. The first Disconnect's code and reason are the ones sent;
// once the connection ended there is nothing left to close.
func (c *wsConn) Disconnect(code int, reason string) {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.disconnecting {
		return
	}
	c.disconnecting = true
	c.wg.Go(func() {
		_ = c.conn.Close(websocket.StatusCode(code), reason)
		c.cancel()
	})
}

// Closed implements Notifier.
func (c *wsConn) Closed() <-chan struct{} { return c.ctx.Done() }

// AfterClose implements Notifier.
func (c *wsConn) AfterClose(f func()) { context.AfterFunc(c.ctx, f) }

// goAway closes the connection for shutdown (or its chain's removal): StatusGoingAway and a reason,
// then ends whatever still runs on it.
func (c *wsConn) goAway(reason string) {
	_ = c.conn.Close(websocket.StatusGoingAway, reason)
	c.cancel()
}

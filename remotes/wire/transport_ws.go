package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// WebSocket transport limits.
const (
	wsDialTimeout  = 10 * time.Second
	wsWriteTimeout = 10 * time.Second
	// wsPingInterval and wsPingTimeout find a connection that died without a
	// FIN (a NAT or load balancer forgot it); without them every call on it
	// would wait for its own deadline, forever.
	wsPingInterval = 30 * time.Second
	wsPingTimeout  = 15 * time.Second
	// wsPeekQuiet is how long a connection goes without a write before a
	// read written on it is looked at first (sock.go): an idle timeout
	// does not close a connection in use, and a read the remote's restart
	// loses is the pool's to try again. A write is always looked at first.
	wsPeekQuiet = time.Second
	// wsOutQueue is how many encoded calls may wait for the writer.
	wsOutQueue = 64
	// wsDiscardFactor caps how much of a message that cannot be kept (over
	// the cap, not an object, no budget) is read and thrown away, as a
	// multiple of the cap, so that the connection stays usable; a message
	// that goes on past it closes the connection instead.
	wsDiscardFactor = 4
)

// errTransportClosed is the cause for calls on a closed transport.
var errTransportClosed = errors.New("transport closed")

// wsTransport multiplexes calls over one WebSocket connection to a remote,
// matched to replies by id. The connection is dialled on the first call and
// again on the first call after it is lost; one dial runs at a time and every
// caller waiting for it shares its outcome, but for a failure (see connect).
//
// A call whose connection is lost before the call was written is sent once
// more, on a new connection: the remote never saw it, so even a write
// (eth_sendRawTransaction) cannot be done twice. That is the call that
// lands on a connection the remote closed while it was idle, before the
// reader learnt of it. A call written before the loss is never sent again
// here, read or write: the remote may have acted on it, and the pool (not
// the transport) decides whether another try is safe.
type wsTransport struct {
	name     string
	url      string // never in an error or log
	red      *Redactor
	maxBytes int64
	budget   *ReplyBudget
	dialOpts *websocket.DialOptions
	log      *slog.Logger
	ids      atomic.Uint64
	bufs     bufPool
	onRedial func() // nil: none
	// joinedDial, when set (by tests), is called when a caller joins a
	// dial another caller started.
	joinedDial func()
	// peekQuiet is wsPeekQuiet; tests shorten it.
	peekQuiet time.Duration

	// ctx ends at close, cancelling a dial in progress.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the dialler and every connection's goroutines.
	wg sync.WaitGroup

	mu      sync.Mutex
	conn    *wsConn // the live connection, or nil
	dialing *wsDial // the dial in progress, or nil
	closed  bool
	dialed  bool // a connection was made before
}

var _ Transport = (*wsTransport)(nil)

type wsDial struct {
	done chan struct{} // closed when conn or err is set
	conn *wsConn
	err  error
}

func newWSTransport(opts Options, u *url.URL) *wsTransport {
	ctx, cancel := context.WithCancel(context.Background())
	return &wsTransport{
		name:      opts.Name,
		url:       opts.URL,
		red:       opts.Redactor(),
		maxBytes:  opts.MaxResponseBytes,
		budget:    opts.Budget,
		dialOpts:  wsDialOptions(opts),
		log:       opts.Logger,
		onRedial:  opts.OnRedial,
		peekQuiet: wsPeekQuiet,
		ctx:       ctx,
		cancel:    cancel,
	}
}

// wsDialOptions is the handshake setup shared by calls and heads. The HTTP
// client is HTTP/1.1 only (the upgrade needs it) and has no timeout: the
// dial's ctx bounds it. A dial whose ctx carries a *sockSlot leaves its
// network connection there (sock.go).
func wsDialOptions(opts Options) *websocket.DialOptions {
	dialer := &net.Dialer{Timeout: httpDialTimeout, KeepAlive: httpKeepAlive}
	return &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dialer.DialContext(ctx, network, addr)
				if err == nil {
					keepSock(ctx, conn)
				}
				return conn, err
			},
			TLSHandshakeTimeout: httpTLSHandshakeTimeout,
		}},
		HTTPHeader:      opts.Headers.Clone(),
		CompressionMode: websocket.CompressionDisabled,
	}
}

func (t *wsTransport) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, int, error) {
	r := t.call(ctx, method, params)
	if r.unsent && ctx.Err() == nil {
		r = t.call(ctx, method, params) // once: see wsTransport
	}
	return r.result, 0, r.err
}

// call sends one call on the live connection, dialling one if need be.
func (t *wsTransport) call(ctx context.Context, method string, params json.RawMessage) wsReply {
	c, err := t.connect(ctx)
	if err != nil {
		return wsReply{err: err}
	}
	id := t.ids.Add(1)
	reply := make(chan wsReply, 1)
	if err := c.register(id, reply); err != nil {
		return wsReply{err: err, unsent: true} // lost since connect
	}
	buf := t.bufs.get()
	*buf = appendRequest(*buf, id, method, params)
	select {
	case c.out <- wsOut{id: id, buf: buf, read: evm.Lookup(method).Hedgeable()}:
	case r := <-reply: // the connection died first
		t.bufs.put(buf)
		return r
	case <-ctx.Done():
		c.unregister(id)
		t.bufs.put(buf)
		return wsReply{err: fmt.Errorf("remote %s: %w", t.name, ctx.Err())}
	}
	select {
	case r := <-reply:
		return r
	case <-ctx.Done():
		c.unregister(id)
		return wsReply{err: fmt.Errorf("remote %s: %w", t.name, ctx.Err())}
	}
}

// connect returns the live connection, dialling one if there is none.
//
// A caller that joined a dial another caller started, and saw it fail,
// dials once more of its own while its ctx lasts: that dial may have begun
// while the remote was down, before this call was made, and its refusal
// says nothing of the remote now. The caller who started a dial takes its
// outcome as it is, so a remote that stays down costs each call at most
// two dials.
func (t *wsTransport) connect(ctx context.Context) (*wsConn, error) {
	for joinedFailed := false; ; joinedFailed = true {
		c, joined, err := t.connectOnce(ctx)
		if err == nil || !joined || joinedFailed || ctx.Err() != nil {
			return c, err
		}
	}
}

// connectOnce is one go of connect; joined: the dial waited for was
// started by another caller.
func (t *wsTransport) connectOnce(ctx context.Context) (c *wsConn, joined bool, err error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, fmt.Errorf("remote %s: %w: %w", t.name, ErrTransport, errTransportClosed)
	}
	if c := t.conn; c != nil && c.alive() {
		t.mu.Unlock()
		return c, false, nil
	}
	d := t.dialing
	joined = d != nil
	if d == nil {
		// The dial runs on its own goroutine so that the caller who started
		// it can give up without failing the others waiting on it.
		d = &wsDial{done: make(chan struct{})}
		t.dialing = d
		t.wg.Add(1)
		go t.dial(d)
	}
	t.mu.Unlock()
	if joined && t.joinedDial != nil {
		t.joinedDial()
	}

	select {
	case <-d.done:
		return d.conn, joined, d.err
	case <-ctx.Done():
		return nil, false, fmt.Errorf("remote %s: dial: %w", t.name, ctx.Err())
	}
}

func (t *wsTransport) dial(d *wsDial) {
	defer t.wg.Done()
	ctx, cancel := context.WithTimeout(t.ctx, wsDialTimeout)
	slot := new(sockSlot)
	ws, _, err := websocket.Dial(withSockSlot(ctx, slot), t.url, t.dialOpts)
	cancel()

	t.mu.Lock()
	defer t.mu.Unlock()
	t.dialing = nil
	switch {
	case t.closed:
		if ws != nil {
			ws.CloseNow()
		}
		d.err = fmt.Errorf("remote %s: %w: %w", t.name, ErrTransport, errTransportClosed)
	case err != nil:
		d.err = transportFailure(t.name, t.red, "dial", err)
		t.log.Debug("remote websocket dial failed", "remote", t.name, "err", d.err)
	default:
		d.conn = t.startConn(ws, slot.sock())
		t.conn = d.conn
		if t.dialed && t.onRedial != nil {
			t.onRedial()
		}
		t.dialed = true
	}
	close(d.done)
}

func (t *wsTransport) Close() {
	t.mu.Lock()
	t.closed = true
	c := t.conn
	t.conn = nil
	t.mu.Unlock()

	t.cancel()
	if c != nil {
		c.fail(fmt.Errorf("remote %s: %w: %w", t.name, ErrTransport, errTransportClosed))
	}
	t.wg.Wait()
}

// wsReply is what a caller waiting on an id receives.
type wsReply struct {
	result json.RawMessage
	err    error
	// unsent: err is the connection's loss, and the call was not written
	// on it; the remote never saw it.
	unsent bool
}

// wsOut is an encoded call for the writer.
type wsOut struct {
	id   uint64
	buf  *[]byte
	read bool // a read (evm's Hedgeable): see wsPeekQuiet
}

// wsPending is a call waiting for its reply.
type wsPending struct {
	reply   chan<- wsReply
	written bool // the writer has begun to write it: the remote may see it
}

// wsConn is one WebSocket connection with its reader, writer and pinger.
// When any of them fails, the connection is dead: every pending call gets
// ErrTransport and the next call dials a new one.
type wsConn struct {
	t      *wsTransport
	ws     *websocket.Conn
	sock   *sock           // the network connection under ws, for a look before each write; nil: none
	ctx    context.Context // ends when the connection dies
	cancel context.CancelFunc
	out    chan wsOut // encoded calls, for the writer

	mu      sync.Mutex
	pending map[uint64]wsPending
	err     error // why the connection died; nil while alive
}

// startConn starts the connection's goroutines. Called with t.mu held and
// t not closed, so that t.wg.Add cannot race close's Wait.
func (t *wsTransport) startConn(ws *websocket.Conn, sk *sock) *wsConn {
	// Replies are bounded by readMessage, which can skip an oversize message
	// and keep the connection; the library's own limit would close it.
	ws.SetReadLimit(-1)
	ctx, cancel := context.WithCancel(t.ctx)
	c := &wsConn{
		t:       t,
		ws:      ws,
		sock:    sk,
		ctx:     ctx,
		cancel:  cancel,
		out:     make(chan wsOut, wsOutQueue),
		pending: make(map[uint64]wsPending),
	}
	t.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.pingLoop()
	return c
}

func (c *wsConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

func (c *wsConn) register(id uint64, ch chan<- wsReply) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.pending[id] = wsPending{reply: ch}
	return nil
}

func (c *wsConn) unregister(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// deliver hands a reply to the call waiting for id, if it still waits.
func (c *wsConn) deliver(id uint64, r wsReply) {
	c.mu.Lock()
	p, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ok {
		p.reply <- r // buffered, and each id is delivered once
	}
}

// fail kills the connection once: pending calls get err, goroutines stop.
// A call not yet written learns that it was not (wsReply.unsent).
func (c *wsConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()

	for _, p := range pending {
		p.reply <- wsReply{err: err, unsent: !p.written}
	}
	c.cancel()
	c.ws.CloseNow()
}

func (c *wsConn) readLoop() {
	defer c.t.wg.Done()
	for {
		data, taken, err := c.readMessage()
		switch {
		case err == nil:
			c.route(data)
			c.t.budget.give(taken) // the caller has its result
		case errors.Is(err, errOverCap):
			c.reject(data, tooLarge(c.t.name, c.t.maxBytes))
		case errors.Is(err, ErrReplyBudget):
			c.reject(data, fmt.Errorf("remote %s: read reply: %w", c.t.name, err))
		case errors.Is(err, errNotObject):
			c.t.log.Debug("remote websocket sent a malformed message", "remote", c.t.name, "err", err)
		default:
			err = transportFailure(c.t.name, c.t.red, "read", err)
			if c.alive() {
				c.t.log.Debug("remote websocket connection lost", "remote", c.t.name, "err", err)
			}
			c.fail(err)
			return
		}
	}
}

// readMessage reads one message of at most maxBytes, as replyRead does. A
// message it cannot keep (errOverCap, errNotObject, ErrReplyBudget) is read
// to its end and thrown away, so that the connection stays usable, and
// returned with its first bytes, which may hold its id.
func (c *wsConn) readMessage() (data []byte, taken int64, err error) {
	_, r, err := c.ws.Reader(c.ctx)
	if err != nil {
		return nil, 0, err
	}
	rr := replyRead{max: c.t.maxBytes, budget: c.t.budget, object: true}
	data, taken, err = rr.read(c.ctx, r)
	if errors.Is(err, errOverCap) || errors.Is(err, errNotObject) || errors.Is(err, ErrReplyBudget) {
		if derr := discardMessage(r, wsDiscardFactor*c.t.maxBytes); derr != nil {
			return nil, 0, derr
		}
	}
	return data, taken, err
}

// discardMessage reads the rest of a message, at most limit bytes.
func discardMessage(r io.Reader, limit int64) error {
	_, err := io.CopyN(io.Discard, r, limit)
	switch {
	case err == io.EOF:
		return nil
	case err == nil:
		return fmt.Errorf("a message venn could not keep goes on past %d more bytes", limit)
	}
	return err
}

// route hands a reply to its caller. Notifications (no id) and replies to
// calls that gave up are dropped.
func (c *wsConn) route(data []byte) {
	env, err := parseEnvelope(data)
	if err != nil {
		c.t.log.Debug("remote websocket sent a malformed message", "remote", c.t.name, "err", err)
		return
	}
	id, ok := parseID(env.id)
	if !ok {
		return
	}
	result, err := env.outcome(c.t.name, c.t.red, 0)
	c.deliver(id, wsReply{result: result, err: err})
}

// reject fails the call a reply it could not keep belongs to. Its id is
// looked for in the reply's first bytes; when it comes later, the call
// cannot be named and the connection is dropped instead, failing every
// call on it rather than leaving one to hang until its deadline.
func (c *wsConn) reject(prefix []byte, err error) {
	if id, ok := parseID(scanID(prefix)); ok {
		c.deliver(id, wsReply{err: err})
		return
	}
	c.fail(fmt.Errorf("remote %s: %w: dropped the connection after a reply it could not match to a call (%v)",
		c.t.name, ErrTransport, err))
}

func (c *wsConn) writeLoop() {
	defer c.t.wg.Done()
	var wrote time.Time // the last write began; zero: none yet
	for {
		select {
		case <-c.ctx.Done():
			return
		case o := <-c.out:
			// A remote that closed the connection while it was idle has
			// left its FIN with the system before the reader learns of it:
			// the call is not written where the remote will never read it.
			// A read on a connection written to within peekQuiet skips the
			// look, a system call: the connection is in use.
			now := time.Now()
			if (!o.read || now.Sub(wrote) >= c.t.peekQuiet) && c.sock.peerClosed() {
				c.t.bufs.put(o.buf)
				c.fail(transportFailure(c.t.name, c.t.red, "write", errPeerClosed))
				return
			}
			wrote = now
			c.setWritten(o.id, true)
			// The write has its own timeout, not the caller's ctx: the
			// library closes the connection when a write's ctx ends, and
			// one impatient caller must not kill it for all.
			ctx, cancel := context.WithTimeout(c.ctx, wsWriteTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, *o.buf)
			cancel()
			c.t.bufs.put(o.buf)
			if err != nil {
				// A failed write left at most part of its frame: the
				// remote cannot have read the call.
				c.setWritten(o.id, false)
				c.fail(transportFailure(c.t.name, c.t.red, "write", err))
				return
			}
		}
	}
}

// setWritten marks whether the call id (if it still waits) may have
// reached the remote.
func (c *wsConn) setWritten(id uint64, written bool) {
	c.mu.Lock()
	if p, ok := c.pending[id]; ok {
		p.written = written
		c.pending[id] = p
	}
	c.mu.Unlock()
}

func (c *wsConn) pingLoop() {
	defer c.t.wg.Done()
	if err := pingUntil(c.ctx, c.ws, wsPingInterval, wsPingTimeout); err != nil && c.ctx.Err() == nil {
		c.fail(transportFailure(c.t.name, c.t.red, "ping", err))
	}
}

// pingUntil pings ws every interval until ctx ends (nil) or a pong does not
// come back within timeout (the error): it finds a connection that died
// without a FIN.
func pingUntil(ctx context.Context, ws *websocket.Conn, interval, timeout time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := ws.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// parseID reads a numeric id as sent by this transport.
func parseID(raw []byte) (uint64, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	if len(raw) == 0 || len(raw) > 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(string(raw), 10, 64)
	return id, err == nil
}

// scanID finds the top-level id in a possibly truncated message, stopping at
// the first member it cannot skip.
func scanID(b []byte) []byte {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	i = jsonscan.SkipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		keyEnd, err := jsonscan.ValidString(b, i)
		if err != nil {
			return nil
		}
		key := string(b[i+1 : keyEnd-1])
		i = jsonscan.SkipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return nil
		}
		i = jsonscan.SkipSpace(b, i+1)
		start := i
		if i, err = jsonscan.ValidValue(b, i, 1); err != nil {
			return nil
		}
		if key == "id" {
			return b[start:i]
		}
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return nil
		}
		i = jsonscan.SkipSpace(b, i+1)
	}
	return nil
}

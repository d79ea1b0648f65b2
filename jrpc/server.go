package jrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// minReadBuf is the first buffer for a body or message of unknown size.
const minReadBuf = 512

// maxFirstReadBuf caps the first buffer for a body of declared size: a client
// can declare max_body_bytes and send nothing, so memory must follow the
// bytes that arrive (at most twice them), not the declaration.
const maxFirstReadBuf = 64 << 10

// Options configure a Server.
type Options struct {
	// Limits bound what clients can make venn hold; zero fields take their
	// defaults.
	Limits Limits
	// Logger gets request logs (debug), handler panics and unknown errors;
	// nil discards them.
	Logger *slog.Logger
	// Registerer gets venn_requests_total, venn_request_duration_seconds,
	// venn_ws_connections and venn_limit_rejections_total; nil records none.
	Registerer prometheus.Registerer
	// MethodLabel maps a client's method to a metric label from a bounded
	// set ("" for none of them); nil labels every method "other".
	MethodLabel func(method string) string
	// Gate decides who may call what, and how often (package edge); nil:
	// every caller may call every method.
	Gate Gate
	// Hook sees every call served (hook.go; venn's tracing); nil: none,
	// at no cost.
	Hook CallHook
	// DiagnosticHeaders puts X-Venn-Source, -Remote, -Attempts, -Cache and
	// -Duration-Ms on HTTP answers (diag.go); off, none of them.
	DiagnosticHeaders bool
	// OnCall is called once per client call, with its answer written, on
	// the goroutine that served it (a batch's calls one after another): a
	// request log. It must not block; nil costs nothing.
	OnCall func(Call)
	// Compression compresses answers and decodes compressed requests
	// (compress.go); zero: compressed requests decoded, answers never
	// compressed.
	Compression Compression
}

// Peer describes the client of a call. Handlers find it in their context.
type Peer struct {
	Transport  string // "http" or "ws"
	RemoteAddr string
	Header     http.Header // of the HTTP request or the WebSocket upgrade; read only
	// Key is the name of the caller's API key ("" without keys); never the
	// key itself.
	Key string
	// Tenant names the caller's tenant (its key's, or its JWT's); ""
	// without one.
	Tenant string
	// ClientIP is the client's address as the Gate works it out (behind
	// trusted proxies); invalid when it works none out.
	ClientIP netip.Addr
	// RequestID is the request's X-Request-Id (RequestID): the client's,
	// or one venn made. A WebSocket connection's calls share its upgrade's.
	RequestID string
}

type peerKey struct{}

// PeerFromContext returns the client of the call ctx belongs to.
func PeerFromContext(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(*Peer)
	if !ok {
		return Peer{}, false
	}
	return *p, true
}

// Server serves JSON-RPC 2.0 over HTTP and WebSocket, one Handler per chain,
// at /{chain}. A trailing slash and a wrong case still reach the chain,
// and with one chain it is served at / too: every client's default URL is
// the bare host and port.
type Server struct {
	limits      atomic.Pointer[Limits] // swapped whole by SetLimits
	log         *slog.Logger
	metrics     *metrics
	methodLabel func(string) string
	diag        bool       // diagnostic headers
	onCall      func(Call) // nil: no request log
	wsDeflate   bool       // permessage-deflate offered on upgrades
	ids         *requestIDs
	comp        *compressor

	gate     Gate          // nil: open
	gateGen  atomic.Uint64 // Readmit calls: a connection admitted before one is admitted again
	hook     CallHook      // nil: none
	pathKeys bool          // /CHAIN/KEY is routed: the gate takes keys in the path

	handleMu sync.Mutex // serializes Handle; readers load chains lock-free
	chains   atomic.Pointer[chainSet]

	bufs sync.Pool // *[]byte answer buffers

	// mu orders admissions (calls, connections) against Shutdown.
	mu       sync.RWMutex
	closing  atomic.Bool
	inflight atomic.Int64 // messages being served
	// httpInFlight counts POSTs from before their body is read until their
	// answer is written; at most MaxHTTPInFlight are let in.
	httpInFlight atomic.Int64
	idle         chan struct{} // signalled when inflight drops to zero while closing
	conns        map[*wsConn]struct{}
	nconns       int
	connsByIP    map[string]int
	connWG       sync.WaitGroup // one per admitted WebSocket connection
	pings        pingWheel
}

// chainSet is the chains served, replaced whole by Handle.
type chainSet struct {
	byName map[string]*chainEntry
	paths  []string // "/" + each name, sorted: what a 404 lists
}

// lookup finds the chain a path's first segment names: exactly, else the
// one chain it names but for case, else, for "" (the root), the only
// chain; nil when none or several fit.
func (cs *chainSet) lookup(name string) *chainEntry {
	if ch := cs.byName[name]; ch != nil {
		return ch
	}
	var found *chainEntry
	for n, ch := range cs.byName {
		if name == "" && len(cs.byName) == 1 || name != "" && strings.EqualFold(n, name) {
			if found != nil {
				return nil // two chains differ only by case: neither is meant
			}
			found = ch
		}
	}
	return found
}

// chainEntry is one served chain.
type chainEntry struct {
	name    string
	h       Handler
	metrics *chainMetrics // nil when metrics are off
}

// NewServer returns a Server with no chains; add them with Handle.
func NewServer(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		log:         log,
		metrics:     newMetrics(opts.Registerer),
		methodLabel: opts.MethodLabel,
		diag:        opts.DiagnosticHeaders,
		onCall:      opts.OnCall,
		ids:         newRequestIDs(),
		comp:        newCompressor(opts.Compression),
		wsDeflate:   opts.Compression.WebSocket,
		gate:        opts.Gate,
		hook:        opts.Hook,
		pathKeys:    opts.Gate != nil && opts.Gate.KeysInPath(),
		idle:        make(chan struct{}, 1),
		conns:       make(map[*wsConn]struct{}),
		connsByIP:   make(map[string]int),
	}
	s.pings.interval = func() time.Duration { return s.lim().WSPingInterval }
	s.pings.kick = make(chan struct{}, 1)
	s.bufs.New = func() any {
		b := make([]byte, 0, minReadBuf)
		return &b
	}
	s.chains.Store(&chainSet{byName: map[string]*chainEntry{}})
	s.SetLimits(opts.Limits)

	return s
}

// Handle serves chain at /{chain} with h. Call it while wiring, before
// serving; it is safe (but unusual) later. It panics on an empty name, a nil
// handler or a chain already handled, as http.ServeMux does: all are wiring
// bugs.
func (s *Server) Handle(chain string, h Handler) {
	if chain == "" || strings.Contains(chain, "/") {
		panic(fmt.Sprintf("jrpc: invalid chain name %q", chain))
	}
	if h == nil {
		panic("jrpc: nil handler for chain " + chain)
	}
	s.handleMu.Lock()
	defer s.handleMu.Unlock()
	old := s.chains.Load().byName
	if _, dup := old[chain]; dup {
		panic("jrpc: chain " + chain + " handled twice")
	}
	byName := make(map[string]*chainEntry, len(old)+1)
	for k, v := range old {
		byName[k] = v
	}
	byName[chain] = &chainEntry{name: chain, h: h, metrics: s.metrics.forChain(chain)}
	s.chains.Store(newChainSet(byName))
}

// newChainSet is the set of chains byName, with their paths in order.
func newChainSet(byName map[string]*chainEntry) *chainSet {
	cs := &chainSet{byName: byName}
	for k := range byName {
		cs.paths = append(cs.paths, "/"+k)
	}
	slices.Sort(cs.paths)
	return cs
}

// Handler returns the HTTP handler: POST /{chain} for JSON-RPC over HTTP,
// GET /{chain} with Upgrade: websocket for JSON-RPC over WebSocket.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.route) }

// route serves / (the only chain, when there is one), /CHAIN and, with
// keys in paths, /CHAIN/KEY; one trailing slash is dropped (/CHAIN/ is
// /CHAIN). It is a path split, not a router: every call passes here, and
// a router's context and path values cost an allocation each.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	path := r.URL.RawPath // a key's escapes stay as sent
	if path == "" {
		path = r.URL.Path
	}
	if path == "" {
		path = "/" // an absolute-form request line without a path: the root
	}
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		s.notFound(w, r)
		return
	}
	name, key, keyed := strings.Cut(rest, "/")
	if keyed && (!s.pathKeys || name == "" || key == "" || strings.Contains(key, "/")) {
		s.notFound(w, r)
		return
	}
	s.serveHTTP(w, r, name, key)
}

func (s *Server) chain(name string) *chainEntry { return s.chains.Load().lookup(name) }

// serveHTTP serves a request for the chain name, with the key its path
// holds ("" for none).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, name, key string) {
	id := s.tagRequest(w, r)
	ch := s.chain(name)
	if ch == nil {
		if key != "" {
			// The path holds a key: repeat only the chain.
			writeHTTPError(w, http.StatusNotFound, errUnknownChain("/"+name, s.chains.Load().paths))
			return
		}
		s.notFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.servePost(w, r, ch, id, key)
	case http.MethodGet:
		if hasToken(r.Header.Get("Upgrade"), "websocket") {
			s.serveWS(w, r, ch, id, key)
			return
		}
		s.methodNotAllowed(w, r)
	default:
		s.methodNotAllowed(w, r)
	}
}

// servePost serves one JSON-RPC POST. It holds one of MaxHTTPInFlight slots
// from before the body is read until the answer is written, so bodies and
// calls in flight are bounded together.
func (s *Server) servePost(w http.ResponseWriter, r *http.Request, ch *chainEntry, id, key string) {
	if n := s.httpInFlight.Add(1); n > int64(s.lim().MaxHTTPInFlight) {
		s.httpInFlight.Add(-1)
		ch.metrics.rejected(limitHTTPInFlight)
		w.Header().Set("Retry-After", "1")
		writeHTTPError(w, http.StatusServiceUnavailable, errTooManyHTTPRequests(s.lim().MaxHTTPInFlight))
		return
	}
	defer s.httpInFlight.Add(-1)

	cl, ok := s.admit(w, r, ch, TransportHTTP, key)
	if !ok {
		return
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		ch.metrics.count(otherMethod, outcomeInvalid)
		writeHTTPError(w, http.StatusUnsupportedMediaType, errContentType())
		return
	}
	body, ok := s.readBody(w, r, ch)
	if !ok {
		return
	}

	var (
		hr *httpRequest // with a caller: it may meter the calls
		p  *Peer
	)
	if cl != nil {
		hr = new(httpRequest)
		p = &hr.peer
		setPeer(p, cl, TransportHTTP, r, id)
	} else {
		p = peer(cl, TransportHTTP, r, id)
	}
	ctx := context.WithValue(r.Context(), peerKey{}, p)
	ctx = withSkipCache(ctx, r.Header, true)
	admitted := s.beginCalls()
	if admitted {
		defer s.endCalls()
	}
	s.answerHTTP(ctx, w, ch, cl, body, admitted, s.comp.choose(r.Header.Get("Accept-Encoding")), hr)
}

// httpRequest is what one POST of a Gate's caller keeps for its life, in
// one allocation: its Peer (in the calls' context), room for a single
// call's Charged, which a Meter (an interface: the slice escapes) would
// otherwise have allocated on its own, and the answer's header as the
// Meter sees it, with room for the value it sets.
type httpRequest struct {
	peer    Peer
	charged [1]Charged
	answer  AnswerHeader
}

// readBody reads a POST body within MaxBodyBytes and HTTPReadTimeout, or
// answers the client itself and returns false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, ch *chainEntry) ([]byte, bool) {
	limit := s.lim().MaxBodyBytes
	if r.ContentLength > limit {
		ch.metrics.rejected(limitBody)
		writeHTTPError(w, http.StatusRequestEntityTooLarge, errBodyTooLarge(limit))
		return nil, false
	}
	// The deadline covers the body only, never the call: a long eth_getLogs
	// is honest. net/http lifts it itself at the body's EOF (the read
	// behind that watches for the client leaving), and an HTTP/2 stream
	// reads nothing after it; a body cut short has it lifted here. A
	// writer without deadlines (a wrapping middleware) just goes without.
	enc, err := s.comp.contentEncoding(r.Header.Get("Content-Encoding"))
	if err != nil {
		ch.metrics.count(otherMethod, outcomeInvalid)
		writeHTTPError(w, http.StatusUnsupportedMediaType, errBadEncoding(err.(*errEncoding)))
		return nil, false
	}
	rc := http.NewResponseController(w)
	timed := rc.SetReadDeadline(time.Now().Add(s.lim().HTTPReadTimeout)) == nil
	var body []byte
	if enc == "" {
		body, err = readLimited(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	} else {
		// The compressed bytes are bounded by the limit too: a stream that
		// decodes to little must still end.
		body, err = s.comp.decode(enc, http.MaxBytesReader(w, r.Body, limit), limit)
	}
	if err == nil {
		return body, true
	}
	if timed {
		_ = rc.SetReadDeadline(time.Time{})
	}
	var (
		mbe    *http.MaxBytesError
		badEnc *errEncoding
	)
	switch {
	case enc != "" && errors.Is(err, errTooLarge):
		ch.metrics.rejected(limitBody)
		w.Header().Set("Connection", "close") // the rest of the body is not read
		writeHTTPError(w, http.StatusRequestEntityTooLarge, errDecodedTooLarge(enc, limit))
	case errors.As(err, &badEnc):
		ch.metrics.count(otherMethod, outcomeInvalid)
		w.Header().Set("Connection", "close")
		writeHTTPError(w, http.StatusBadRequest, errBadEncoding(badEnc))
	case errors.Is(err, errTooLarge) || errors.As(err, &mbe):
		ch.metrics.rejected(limitBody)
		writeHTTPError(w, http.StatusRequestEntityTooLarge, errBodyTooLarge(limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read side is spent: answer and close it.
		ch.metrics.rejected(limitHTTPReadTimeout)
		w.Header().Set("Connection", "close")
		writeHTTPError(w, http.StatusRequestTimeout, errBodyTimeout(s.lim().HTTPReadTimeout))
	default:
		// The client went away mid-body; there is no one to answer.
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "read request body",
			slog.String("chain", ch.name), slog.Any("err", err))
	}
	return nil, false
}

// answerHTTP serves body and writes the answer. Calls refused because the
// server is shutting down are answered with HTTP 503 (and the connection
// closed), which load balancers and clients retry elsewhere; a 200 they
// would take as final.
func (s *Server) answerHTTP(ctx context.Context, w http.ResponseWriter, ch *chainEntry, cl Caller, body []byte, admitted bool, enc string, hr *httpRequest) {
	status := http.StatusOK
	if !admitted {
		status = http.StatusServiceUnavailable
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1") // another replica, or this one restarted
	}
	var start time.Time
	if s.diag || s.onCall != nil {
		start = time.Now()
	}
	bp := s.getBuf()
	out, sv := s.serveMessage(ctx, ch, cl, body, *bp, admitted)
	if refused := sv.refused; refused != nil {
		// The rate limits refused every call of the request: say so in
		// HTTP too, which clients and proxies back off on.
		status = refused.Status
		if refused.RetryAfter != "" {
			w.Header().Set("Retry-After", refused.RetryAfter)
		}
	}
	// The deadline starts once the answer is built, so a long call is never
	// cut by it; a client that does not read then loses its slot and the
	// answer's buffer when it passes. net/http clears it after the final
	// flush, before the connection's next request or a hijack. A writer
	// without deadlines goes without, as in readBody.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.lim().HTTPWriteTimeout))
	if cl != nil {
		hr.answer.h = w.Header()
		charge(ctx, ch, cl, &sv, &hr.answer, hr.charged[:0])
	}
	if len(out) == 0 {
		w.WriteHeader(status) // only notifications: nothing to say
	} else {
		h := w.Header()
		if s.diag {
			writeDiagnostics(h, &sv, time.Since(start))
		}
		h["Content-Type"] = jsonContentType
		wire := out
		if s.comp.replies {
			h["Vary"] = varyAcceptEncoding // caches keep one answer per encoding
			if enc != "" && len(out) >= s.comp.minBytes {
				if zb, err := s.comp.compress(enc, out); err == nil {
					defer s.comp.release(zb)
					wire = zb.Bytes()
					h["Content-Encoding"] = encodingHeader(enc)
				}
			}
		}
		h.Set("Content-Length", strconv.Itoa(len(wire)))
		w.WriteHeader(status)
		// A failed write means the client left, or did not read in time;
		// the second is counted (answers that fit the server's buffer are
		// flushed after this and cannot be).
		if _, err := w.Write(wire); errors.Is(err, os.ErrDeadlineExceeded) {
			ch.metrics.rejected(limitHTTPWriteTimeout)
		}
	}
	*bp = out
	s.putBuf(bp)
	if s.onCall != nil {
		s.logCalls(ctx, ch, &sv, start, status)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if w.Header().Get(requestIDHeader) == "" { // not from serveHTTP
		s.tagRequest(w, r)
	}
	writeHTTPError(w, http.StatusNotFound, errUnknownChain(r.URL.Path, s.chains.Load().paths))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	if w.Header().Get(requestIDHeader) == "" { // not from serveHTTP
		s.tagRequest(w, r)
	}
	w.Header().Set("Allow", http.MethodPost)
	writeHTTPError(w, http.StatusMethodNotAllowed, errMethodNotAllowed(r.Method))
}

// writeHTTPError answers a whole HTTP request with one error object.
func writeHTTPError(w http.ResponseWriter, status int, e *Error) {
	body := appendError(make([]byte, 0, 128), nil, e)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// jsonContentType is every answer's Content-Type, one value shared by all
// (net/http copies a handler's header before it writes it).
var jsonContentType = []string{"application/json"}

// isJSONContentType accepts application/json with any parameters, or no
// Content-Type at all (curl -d sends form encoding, but many scripts send
// nothing).
func isJSONContentType(ct string) bool {
	if ct == "" {
		return true
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}

// errTooLarge is readLimited's answer to input over its limit.
var errTooLarge = errors.New("over the size limit")

// readLimited reads r to the end into a new buffer (handlers may keep slices
// of it, so it is never pooled). It never allocates more than limit+1 bytes:
// sizeHint (a Content-Length, or <= 0) sizes the first buffer up to
// maxFirstReadBuf, which then doubles as bytes arrive, up to the limit.
func readLimited(r io.Reader, sizeHint, limit int64) ([]byte, error) {
	size := int64(minReadBuf)
	if sizeHint > 0 {
		size = min(sizeHint+1, maxFirstReadBuf) // +1: room to see EOF without growing
	}
	buf := make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (s *Server) getBuf() *[]byte {
	bp := s.bufs.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

func (s *Server) putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	s.bufs.Put(bp)
}

// shutdownReason is the close reason WebSocket clients read on shutdown.
const shutdownReason = "server shutting down"

// Shutdown drains the server: new calls are answered CodeShuttingDown (with
// HTTP 503 over HTTP) and new connections refused; calls in flight finish (until ctx ends); then every
// WebSocket connection is closed with StatusGoingAway. It returns ctx's error
// if ctx ended first. The HTTP listener is the caller's to shut down.
//
// A WebSocket close handshake is bounded by the websocket library (a few
// seconds); if ctx ends first, Shutdown returns and the closes finish on
// their own.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var err error
	if s.inflight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			err = fmt.Errorf("wait for calls in flight: %w", ctx.Err())
		}
	}

	// Close every connection concurrently, then wait for their handlers: the
	// waiter exits when the last one has, even if ctx ends first.
	for _, c := range conns {
		s.connWG.Add(1) // before the Wait below
		go func() {
			defer s.connWG.Done()
			c.goAway(shutdownReason)
		}()
	}
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = fmt.Errorf("close WebSocket connections: %w", ctx.Err())
		}
	}
	return err
}

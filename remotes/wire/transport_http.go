package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/tracing"
)

// HTTP transport limits.
const (
	httpDialTimeout         = 5 * time.Second
	httpKeepAlive           = 30 * time.Second
	httpIdleConnTimeout     = 90 * time.Second
	httpTLSHandshakeTimeout = 10 * time.Second
	// httpDrainMax is how much of an unread reply tail is read so that the
	// connection goes back to the pool; beyond it, closing is cheaper.
	httpDrainMax = 64 << 10
	// httpMaxResends is how often net/http may send one call again after a
	// connection was lost under it (httpBody.reopen). net/http itself stops
	// only at a new connection, so a remote that closes every connection a
	// call arrives on would get a read once per idle connection.
	httpMaxResends = 1
)

// errLostAgain is the error of a call whose connection was lost before a
// reply once more after it was sent again; a reset, as the loss itself.
var errLostAgain = fmt.Errorf("connection lost before a reply, after a resend on another: %w", io.EOF)

// replayKey in a request's Header makes net/http's Transport send the
// request again on a new connection when the keep-alive connection it was
// written on fails before the first byte of a reply: the remote closed it
// while idle as the request went out (its idle timeout), most likely
// before reading it. Without it net/http resends only a POST that was never
// written, and the call fails with "server closed idle connection", which
// the pool counts against a healthy remote and fails over. Its value is
// empty, so it is never sent (http.Transport's docs): it marks, it does
// not tell the remote anything. Only a read carries it (readTmpl): a write
// that the remote may have read is never sent twice.
const replayKey = "Idempotency-Key"

// replayHeaders are the header names net/http reads as that mark. The
// transport alone sets one: a configured header or a forwarded client
// header of either name would make writes replayable too.
var replayHeaders = [...]string{replayKey, "X-Idempotency-Key"}

// ReplayHeader reports whether name is a header that marks a request as
// safe to send twice (replayKey), which neither a remote's headers nor a
// client may set.
func ReplayHeader(name string) bool {
	name = http.CanonicalHeaderKey(name)
	return name == replayHeaders[0] || name == replayHeaders[1]
}

// httpTransport calls one remote over HTTP(S) with a tuned keep-alive pool.
// It calls http.Transport.RoundTrip directly: no redirects, no cookies, no
// client timeout (ctx carries the deadline) and no url.Error, whose text
// holds the URL and its API key.
type httpTransport struct {
	name     string
	red      *Redactor
	maxBytes int64
	budget   *ReplyBudget
	rt       *http.Transport
	// tmpl and readTmpl are shared read-only by every request: URL, Header
	// and Host are never written after construction, and RoundTrip only
	// reads them. readTmpl is tmpl with replayKey, for reads.
	tmpl     *http.Request
	readTmpl *http.Request
	tracer   *tracing.Tracer // injects the trace context when it propagates
	fwd      *Forwarding     // nil: no client header is forwarded
	ids      atomic.Uint64
	bodies   sync.Pool // *httpBody
	// traced holds copies of tmpl.Header for requests that carry a trace
	// context, each back once its reply's body is closed (traceHeader).
	traced sync.Pool // http.Header
}

var _ Transport = (*httpTransport)(nil)

func newHTTPTransport(opts Options, u *url.URL) *httpTransport {
	dialer := &net.Dialer{Timeout: httpDialTimeout, KeepAlive: httpKeepAlive}
	rt := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          opts.MaxIdleConns,
		MaxIdleConnsPerHost:   opts.MaxIdleConns,
		IdleConnTimeout:       httpIdleConnTimeout,
		TLSHandshakeTimeout:   httpTLSHandshakeTimeout,
		ExpectContinueTimeout: time.Second,
		// Replies are inflated by readBody, which caps the wire bytes and
		// the inflated ones; Go's transparent gzip would hide the former.
		DisableCompression: true,
	}

	h := make(http.Header, len(opts.Headers)+2)
	for k, v := range opts.Headers {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(v)
	}
	h.Set("Content-Type", "application/json")
	if h.Get("Accept-Encoding") == "" {
		h.Set("Accept-Encoding", "gzip") // as Go's transport would: big replies shrink several-fold
	}
	if h.Get("User-Agent") == "" {
		// Some providers sit behind filters that refuse Go's default agent.
		h.Set("User-Agent", "venn")
	}
	for _, k := range replayHeaders {
		h.Del(k) // the transport's own mark (replayHeaders)
	}
	// http.Client turns URL user info into basic auth; RoundTrip does not.
	if u.User != nil && h.Get("Authorization") == "" {
		pass, _ := u.User.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pass))
		h.Set("Authorization", "Basic "+cred)
	}
	host := u.Host
	if v := h.Get("Host"); v != "" {
		host = v // a Host header is only honoured through Request.Host
		h.Del("Host")
	}
	target := *u
	target.User = nil

	tmpl := &http.Request{
		Method:     http.MethodPost,
		URL:        &target,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       host,
	}
	readTmpl := *tmpl
	readTmpl.Header = maps.Clone(h)
	readTmpl.Header[replayKey] = nil
	return &httpTransport{
		name:     opts.Name,
		red:      opts.Redactor(),
		maxBytes: opts.MaxResponseBytes,
		budget:   opts.Budget,
		tracer:   opts.Tracer,
		fwd:      opts.Forward,
		rt:       rt,
		tmpl:     tmpl,
		readTmpl: &readTmpl,
	}
}

func (t *httpTransport) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, int, error) {
	id := t.ids.Add(1)
	body := t.getBody()
	body.b = appendRequest(body.b, id, method, params)

	tmpl, replay := t.tmpl, evm.Lookup(method).Hedgeable()
	if replay {
		tmpl = t.readTmpl
	}
	req := tmpl.WithContext(ctx)
	traced := t.traceHeader(ctx, replay)
	if traced != nil {
		req.Header = traced
	}
	if t.fwd != nil {
		if h := t.fwd.header(ctx, req.Header); h != nil {
			if traced != nil {
				t.traced.Put(traced) // h is a copy: traced is free again
				traced = nil
			}
			req.Header = h
		}
	}
	req.ContentLength = int64(len(body.b))
	req.Body = body.open()
	// GetBody lets RoundTrip send the call again on a new connection: any
	// call that a stale keep-alive connection kept from being written, and
	// a read (replayKey) written on one the remote closed as it went out.
	req.GetBody = body.getBody
	resp, err := t.rt.RoundTrip(req)
	body.release()
	if err != nil {
		// traced is not reused: RoundTrip's goroutines may still read it.
		return nil, 0, failure(ctx, t.name, t.red, "send", err)
	}
	status := resp.StatusCode

	data, taken, err := t.readBody(ctx, resp)
	if traced != nil {
		// The reply's body is closed, so RoundTrip is done with req
		// (http.RoundTripper's contract) and its header can serve another.
		t.traced.Put(traced)
	}
	if err != nil {
		return nil, status, err
	}
	// The result is a slice of data, which is the caller's from here on:
	// the budget covers the reading.
	defer t.budget.give(taken)
	if status < 200 || status > 299 {
		return nil, status, t.statusError(id, status, data)
	}

	env, err := parseEnvelope(data)
	if err != nil {
		return nil, status, BadReply(t.name, err.Error())
	}
	if !env.idIs(id) && (env.errObj == nil || !env.idIsNull()) {
		return nil, status, BadReply(t.name, "reply id does not match the call")
	}
	res, err := env.outcome(t.name, t.red, status)
	return res, status, err
}

// traceHeader is the header of a request sent under ctx that carries the
// trace context: a copy of the template's with ctx's traceparent (and
// replayKey for a replay), from t.traced when one is free; nil when the
// request carries none (the template's header is then sent as it is). The
// copy shares the template's value slices, which nobody writes;
// InjectInto writes new ones.
func (t *httpTransport) traceHeader(ctx context.Context, replay bool) http.Header {
	if !t.tracer.Carries(ctx) {
		return nil
	}
	h, _ := t.traced.Get().(http.Header)
	if h == nil {
		h = make(http.Header, len(t.tmpl.Header)+2)
		maps.Copy(h, t.tmpl.Header)
	}
	if replay {
		h[replayKey] = nil
	} else {
		delete(h, replayKey)
	}
	tracing.InjectInto(ctx, h)
	return h
}

// statusError is the error for a non-2xx reply: the remote's own JSON-RPC
// error when the body is one (providers send 429, 400 and 413 that way),
// else an HTTPStatusError holding the start of the body, redacted before
// it is cut so that no part of a secret survives at the cut.
func (t *httpTransport) statusError(id uint64, status int, body []byte) error {
	if env, err := parseEnvelope(body); err == nil && !env.hasResult && (env.idIs(id) || env.idIsNull()) {
		var ue *UpstreamError
		if _, err := env.outcome(t.name, t.red, status); errors.As(err, &ue) {
			return ue
		}
	}
	text := t.red.Redact(strings.ToValidUTF8(string(body), ""))
	if len(text) > statusBodyMax {
		text = strings.ToValidUTF8(text[:statusBodyMax], "")
	}
	return &HTTPStatusError{Remote: t.name, Status: status, Body: text}
}

// readBody reads the whole reply and closes the body, so that the
// connection can be reused. A 2xx reply is at most maxBytes, on the wire
// and inflated, and must be a JSON object; of any other only the start is
// read. taken is the reply budget data holds, for the caller to give back.
func (t *httpTransport) readBody(ctx context.Context, resp *http.Response) (data []byte, taken int64, err error) {
	body := resp.Body
	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	rr := replyRead{max: t.maxBytes, budget: t.budget, object: ok, truncate: !ok}
	if !ok {
		rr.max = min(rr.max, statusReadMax)
	}
	cl := resp.ContentLength
	if ok && cl > t.maxBytes {
		body.Close()
		return nil, 0, tooLarge(t.name, t.maxBytes)
	}
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		if cl >= 0 && cl <= rr.max {
			data, taken, err = rr.readSized(ctx, body, cl)
		} else {
			data, taken, err = rr.read(ctx, body)
		}
	case "gzip", "x-gzip":
		var gz *gzipBody
		if gz, err = openGzip(body, t.maxBytes); err == nil {
			data, taken, err = rr.read(ctx, gz)
			if err != nil && !errors.Is(err, errOverCap) && !errors.Is(err, errNotObject) &&
				!errors.Is(err, ErrReplyBudget) && ctx.Err() == nil {
				err = gz.fault(err) // the body's own error, the wire cap, or bad gzip
			}
			gz.release()
		}
	default:
		body.Close()
		if !ok {
			return nil, 0, nil // the status says enough: its body is not read
		}
		if len(enc) > 32 {
			enc = enc[:32] + "..."
		}
		return nil, 0, BadReply(t.name, "reply content-encoding "+strconv.Quote(t.red.Redact(enc))+" is not supported")
	}
	if err != nil {
		body.Close()
		if !ok && (errors.Is(err, errOverCap) || errors.Is(err, errBadGzip)) {
			return nil, 0, nil // the status says enough
		}
		return nil, 0, t.readFault(ctx, err)
	}
	drainAndClose(body)
	return data, taken, nil
}

// readFault is the transport's error for a failed read of a reply.
func (t *httpTransport) readFault(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errOverCap):
		return tooLarge(t.name, t.maxBytes)
	case errors.Is(err, errNotObject):
		return BadReply(t.name, err.Error())
	case errors.Is(err, errBadGzip):
		return BadReply(t.name, err.Error())
	case errors.Is(err, ErrReplyBudget):
		return fmt.Errorf("remote %s: read reply: %w", t.name, err)
	}
	return failure(ctx, t.name, t.red, "read reply", err)
}

// drainAndClose reads what is left of a body, if little, so that the
// connection returns to the keep-alive pool.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, httpDrainMax)
	body.Close()
}

func (t *httpTransport) getBody() *httpBody {
	if b, ok := t.bodies.Get().(*httpBody); ok {
		b.refs.Store(1)
		b.reopens.Store(0)
		return b
	}
	b := &httpBody{pool: &t.bodies, b: make([]byte, 0, 512)}
	b.getBody = b.reopen
	b.refs.Store(1)
	return b
}

func (t *httpTransport) Close() { t.rt.CloseIdleConnections() }

// httpBody is a pooled request body. http.Transport may read and close it
// after RoundTrip returns, and may reopen it through GetBody to retry, so
// the buffer goes back to the pool only when the call and every reader
// opened on it are done with it.
type httpBody struct {
	pool    *sync.Pool
	b       []byte
	refs    atomic.Int32
	reopens atomic.Int32                  // resends of the call (httpMaxResends)
	getBody func() (io.ReadCloser, error) // b.reopen, bound once
}

func (b *httpBody) open() io.ReadCloser {
	b.refs.Add(1)
	return &bodyReader{body: b}
}

// reopen is the request's GetBody: net/http calls it to send the call
// again after a connection was lost under it, which it may do once.
func (b *httpBody) reopen() (io.ReadCloser, error) {
	if b.reopens.Add(1) > httpMaxResends {
		return nil, errLostAgain
	}
	return b.open(), nil
}

func (b *httpBody) release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	if cap(b.b) > maxPooledBuf {
		return
	}
	b.b = b.b[:0]
	b.pool.Put(b)
}

// bodyReader reads an httpBody. Its lock makes Close wait for a Read in
// progress, so the buffer is never recycled under a reader.
type bodyReader struct {
	mu     sync.Mutex
	body   *httpBody
	off    int
	closed bool
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errors.New("read of closed request body")
	}
	if r.off >= len(r.body.b) {
		return 0, io.EOF
	}
	n := copy(p, r.body.b[r.off:])
	r.off += n
	return n, nil
}

func (r *bodyReader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.body.release()
	return nil
}

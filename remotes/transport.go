package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/internal/jsonscan"
	"github.com/venn-gateway/venn/jrpc"
)

// Limits of the upstream transports. transportOptions overrides the first two.
const (
	// DefaultMaxIdleConns is the keep-alive pool per HTTP remote. It is large
	// because a busy gateway keeps hundreds of calls in flight per remote.
	DefaultMaxIdleConns = 256
	// DefaultMaxResponseBytes caps one reply body or WebSocket message. Big
	// enough for a large block with receipts or a trace, small enough that a
	// broken remote cannot exhaust memory.
	DefaultMaxResponseBytes = 256 << 20

	// maxPooledBuf keeps request buffers that once held a huge params
	// (a blob transaction, say) from staying in the pool forever.
	maxPooledBuf = 64 << 10
	// statusBodyMax is how much of a non-JSON-RPC error body HTTPStatusError keeps.
	statusBodyMax = 256
)

// transport calls one remote. Implementations are safe for concurrent use.
type transport interface {
	// call sends one JSON-RPC call and returns the raw result bytes, owned by
	// the caller and never re-encoded.
	//
	// Errors: *UpstreamError when the remote sent an error object (HTTPStatus
	// set over HTTP, 0 over WebSocket); *HTTPStatusError for a non-2xx reply
	// whose body is not a JSON-RPC error; ErrBadReply (wrapped) for an empty,
	// non-JSON, oversize or wrong-shape reply; ErrTransport (wrapped) when the
	// remote could not be reached or its reply not read; ctx.Err() (wrapped)
	// when ctx ends first. No error ever contains the remote's URL.
	call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// close releases connections. Calls in flight fail or finish; later
	// calls fail with ErrTransport.
	close()
}

// transportOptions configures one remote's transport.
type transportOptions struct {
	// Name labels the remote in errors and logs. The URL never does: it
	// carries API keys.
	Name string
	// URL is http(s):// or ws(s)://.
	URL string
	// Headers go on every HTTP request and on the WebSocket handshake.
	Headers http.Header
	// MaxIdleConns is the HTTP keep-alive pool size (default 256).
	MaxIdleConns int
	// MaxResponseBytes caps a reply body or WebSocket message (default 256 MiB).
	MaxResponseBytes int64
	Logger           *slog.Logger
	// OnRedial, when set, is called when a WebSocket transport's new
	// connection replaces a lost one; OnSubscribed, when a heads watcher's
	// subscription is confirmed (the first one too). Either may be another
	// endpoint than the one checked before (chaincheck.go). They must not
	// block.
	OnRedial, OnSubscribed func()
}

// newTransport returns the HTTP or WebSocket transport for opts.URL. It does
// no I/O: a WebSocket transport dials on its first call.
func newTransport(opts transportOptions) (transport, error) {
	u, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http", "https":
		return newHTTPTransport(opts, u), nil
	default:
		return newWSTransport(opts, u), nil
	}
}

// normalize fills defaults and parses the URL. Its errors name the remote and
// the fault, never the URL text.
func (o *transportOptions) normalize() (*url.URL, error) {
	if o.Name == "" {
		return nil, errors.New("remote: missing name")
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = DefaultMaxIdleConns
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// url.Parse's error quotes the URL, so only its verdict is kept.
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("remote %s: url: cannot parse", o.Name)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	case "":
		return nil, fmt.Errorf("remote %s: url: missing scheme", o.Name)
	default:
		return nil, fmt.Errorf("remote %s: url: unsupported scheme %q", o.Name, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("remote %s: url: missing host", o.Name)
	}
	return u, nil
}

// redactor removes a URL's secret-bearing parts from error text. The
// standard library quotes URLs in its errors (url.Error, the WebSocket
// handshake); unwrapping is the first defence, this is the second.
type redactor []string

func newRedactor(raw string, u *url.URL) redactor {
	r := redactor{raw}
	add := func(s string) {
		if len(s) > 1 {
			r = append(r, s)
		}
	}
	// Hosts go too: some providers put the key in a subdomain, and DNS
	// errors quote the host ("lookup KEY.provider.example: no such host").
	// A bare name or an IP (http://node:8545) carries no key, and redacting
	// it would mangle ordinary words in node errors ("missing trie node").
	if h := u.Hostname(); strings.Contains(h, ".") && net.ParseIP(h) == nil {
		add(u.Host)
		add(h)
	}
	add(u.RawQuery)
	add(u.EscapedPath())
	add(u.Path)
	if u.User != nil {
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	return r
}

func (r redactor) redact(s string) string {
	for _, secret := range r {
		if strings.Contains(s, secret) {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// failure turns a network-level error into the transport's error: ctx's own
// error when ctx has ended (the caller gave up, the remote did not fail),
// else ErrTransport with the cause stripped of any URL.
func failure(ctx context.Context, name string, red redactor, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("remote %s: %s: %w", name, op, ctxErr)
	}
	return transportFailure(name, red, op, err)
}

func transportFailure(name string, red redactor, op string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if clean := red.redact(msg); clean != msg {
		return fmt.Errorf("remote %s: %s: %w: %s", name, op, ErrTransport, clean)
	}
	return fmt.Errorf("remote %s: %s: %w: %w", name, op, ErrTransport, err)
}

func badReply(name, detail string) error {
	return fmt.Errorf("remote %s: %s: %w", name, detail, ErrBadReply)
}

func tooLarge(name string, limit int64) error {
	return fmt.Errorf("remote %s: reply over %d bytes: %w", name, limit, ErrBadReply)
}

// bufPool recycles request encoding buffers.
type bufPool struct{ p sync.Pool }

func (p *bufPool) get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 512)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	p.p.Put(b)
}

// appendRequest encodes one call by appending, the cheapest way there is:
// params are raw bytes already and the method is almost always plain ASCII.
func appendRequest(b []byte, id uint64, method string, params json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"method":`...)
	b = jrpc.AppendString(b, method)
	b = append(b, `,"params":`...)
	if len(bytes.TrimSpace(params)) == 0 {
		b = append(b, "[]"...)
	} else {
		b = append(b, params...)
	}
	return append(b, '}')
}

// envelope is a decoded JSON-RPC message: spans of the raw bytes, nothing
// copied, the result never re-encoded.
type envelope struct {
	id, result, errObj, method, params []byte
	hasResult                          bool
}

// parseEnvelope decodes the top level of one JSON-RPC message and checks
// that every member is well-formed JSON. "error": null counts as absent.
func parseEnvelope(b []byte) (envelope, error) {
	var e envelope
	i := jsonscan.SkipSpace(b, 0)
	if i == len(b) {
		return e, errors.New("empty reply")
	}
	if b[i] != '{' {
		return e, errors.New("reply is not a JSON object")
	}
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return e, errors.New("invalid JSON")
			}
			keyEnd, err := jsonscan.ValidString(b, i)
			if err != nil {
				return e, err
			}
			key := b[i+1 : keyEnd-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				var k string
				if err := json.Unmarshal(b[i:keyEnd], &k); err != nil {
					return e, errors.New("invalid JSON")
				}
				key = []byte(k)
			}
			i = jsonscan.SkipSpace(b, keyEnd)
			if i >= len(b) || b[i] != ':' {
				return e, errors.New("invalid JSON")
			}
			i = jsonscan.SkipSpace(b, i+1)
			start := i
			if i, err = jsonscan.ValidValue(b, i, 1); err != nil {
				return e, err
			}
			val := b[start:i]
			switch string(key) {
			case "id":
				e.id = val
			case "result":
				e.result, e.hasResult = val, true
			case "error":
				if string(val) == "null" {
					e.errObj = nil
				} else {
					e.errObj = val
				}
			case "method":
				e.method = val
			case "params":
				e.params = val
			}
			i = jsonscan.SkipSpace(b, i)
			if i >= len(b) {
				return e, errors.New("invalid JSON")
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return e, errors.New("invalid JSON")
			}
			i = jsonscan.SkipSpace(b, i+1)
		}
	}
	if jsonscan.SkipSpace(b, i) != len(b) {
		return e, errors.New("invalid JSON after reply")
	}
	return e, nil
}

// idIs reports whether a reply's raw id is the call's id. A string holding
// the digits is accepted too: some providers echo ids as strings.
func (e *envelope) idIs(id uint64) bool {
	var buf [22]byte
	want := strconv.AppendUint(buf[:0], id, 10)
	got := e.id
	if len(got) >= 2 && got[0] == '"' && got[len(got)-1] == '"' {
		got = got[1 : len(got)-1]
	}
	return bytes.Equal(got, want)
}

// idIsNull reports an absent or null id: a remote answers so when it could
// not read the call at all, and such an error still belongs to the call.
func (e *envelope) idIsNull() bool { return e.id == nil || string(e.id) == "null" }

// outcome turns a reply for this call into call's return values. status is
// the HTTP status (0 over WebSocket). An error's text goes to clients, so
// whatever of the remote's URL it echoes is redacted.
func (e *envelope) outcome(name string, red redactor, status int) (json.RawMessage, error) {
	switch {
	case e.errObj != nil && e.hasResult:
		return nil, badReply(name, "reply has both result and error")
	case e.errObj != nil:
		if e.errObj[0] != '{' {
			return nil, badReply(name, "reply error is not an object")
		}
		var je jrpc.Error
		if err := json.Unmarshal(e.errObj, &je); err != nil {
			return nil, badReply(name, "reply error is malformed")
		}
		je.Message = red.redact(je.Message)
		if len(je.Data) > 0 {
			if clean := red.redact(string(je.Data)); clean != string(je.Data) && json.Valid([]byte(clean)) {
				je.Data = json.RawMessage(clean)
			} else if clean != string(je.Data) {
				je.Data = nil
			}
		}
		return nil, &UpstreamError{Remote: name, HTTPStatus: status, Err: &je}
	case e.hasResult:
		return json.RawMessage(e.result), nil
	default:
		return nil, badReply(name, "reply has neither result nor error")
	}
}

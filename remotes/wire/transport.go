package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
)

// Limits of the upstream transports. Options overrides the first two.
const (
	// DefaultMaxIdleConns is the keep-alive pool per HTTP remote. It is large
	// because a busy gateway keeps hundreds of calls in flight per remote.
	DefaultMaxIdleConns = 256
	// DefaultMaxResponseBytes caps one reply body or WebSocket message. Big
	// enough for what real answers need (a full block with its receipts is a
	// few MB, a busy block's call trace tens), small enough that a broken
	// remote cannot take much memory; a remote that serves larger answers
	// (a debug trace of a whole block) is given more by max_response_bytes.
	DefaultMaxResponseBytes = 64 << 20

	// maxPooledBuf keeps request buffers that once held a huge params
	// (a blob transaction, say) from staying in the pool forever.
	maxPooledBuf = 64 << 10
	// statusBodyMax is how much of a non-JSON-RPC error body HTTPStatusError
	// keeps, redacted first.
	statusBodyMax = 256
	// maxErrorText bounds an upstream error's message and its data. Node
	// errors are short (revert data included); a remote must not make venn
	// redact and forward megabytes of text.
	maxErrorText = 1 << 20
)

// transport calls one remote. Implementations are safe for concurrent use.
type Transport interface {
	// Call sends one JSON-RPC call and returns the raw result bytes, owned by
	// the caller and never re-encoded, and the reply's HTTP status (0 over
	// WebSocket, or when no reply came), for the attempt's span.
	//
	// Errors: *UpstreamError when the remote sent an error object (HTTPStatus
	// set over HTTP, 0 over WebSocket); *HTTPStatusError for a non-2xx reply
	// whose body is not a JSON-RPC error; *ReplyTooLargeError for a reply
	// over MaxResponseBytes; ErrReplyBudget (wrapped) when the process's
	// reply budget stayed full; ErrBadReply (wrapped) for an empty,
	// non-JSON or wrong-shape reply; ErrTransport (wrapped) when the remote
	// could not be reached or its reply not read; ctx.Err() (wrapped) when
	// ctx ends first. No error ever contains the remote's secrets.
	Call(ctx context.Context, method string, params json.RawMessage) (res json.RawMessage, status int, err error)
	// Close releases connections. Calls in flight fail or finish; later
	// calls fail with ErrTransport.
	Close()
}

// normalize fills defaults and parses the URL. Its errors name the remote and
// the fault, never the URL text.
func (o *Options) normalize() (*url.URL, error) {
	if o.Name == "" {
		return nil, errors.New("remote: missing name")
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = DefaultMaxIdleConns
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Budget != nil {
		// A larger reply could never get budget: say it is too large.
		o.MaxResponseBytes = min(o.MaxResponseBytes, o.Budget.Size())
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

// failure turns a network-level error into the transport's error: ctx's own
// error when ctx has ended (the caller gave up, the remote did not fail),
// else ErrTransport with the cause stripped of any URL.
func failure(ctx context.Context, name string, red *Redactor, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("remote %s: %s: %w", name, op, ctxErr)
	}
	return transportFailure(name, red, op, err)
}

// transportFailure is ErrTransport with err's text redacted and stripped
// of IP addresses (a dial error names the address a host resolved to,
// which for a self-hosted node is as private as its URL's host). The
// failure's kind (failure.go) goes with it.
func transportFailure(name string, red *Redactor, op string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if clean := MaskAddrs(red.Redact(msg)); clean != msg {
		kind := netKind(err)
		if kind == "" {
			kind = FailTransport
		}
		return &kindError{fmt.Errorf("remote %s: %s: %w: %s", name, op, ErrTransport, clean), kind}
	}
	return fmt.Errorf("remote %s: %s: %w: %w", name, op, ErrTransport, err)
}

func BadReply(name, detail string) error {
	return fmt.Errorf("remote %s: %s: %w", name, detail, ErrBadReply)
}

func tooLarge(name string, limit int64) error {
	return &ReplyTooLargeError{Remote: name, Limit: limit}
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
// the HTTP status (0 over WebSocket). An error's text goes to clients and
// logs, so whatever of the remote's secrets it echoes is redacted; an error
// that holds none is the remote's, unchanged.
func (e *envelope) outcome(name string, red *Redactor, status int) (json.RawMessage, error) {
	switch {
	case e.errObj != nil && e.hasResult:
		return nil, BadReply(name, "reply has both result and error")
	case e.errObj != nil:
		if e.errObj[0] != '{' {
			return nil, BadReply(name, "reply error is not an object")
		}
		obj := e.errObj
		if len(obj) > 2*maxErrorText+4096 {
			obj = boundError(obj) // decoding it whole would cost several times its size
		}
		var je jrpc.Error
		if err := json.Unmarshal(obj, &je); err != nil {
			return nil, BadReply(name, "reply error is malformed")
		}
		if len(je.Message) > maxErrorText {
			je.Message = strings.ToValidUTF8(je.Message[:maxErrorText], "") + "..."
		}
		je.Message = red.Redact(je.Message)
		if len(je.Data) > maxErrorText {
			je.Data = json.RawMessage(droppedData)
		}
		if len(je.Data) > 0 {
			je.Data = red.RedactJSON(je.Data)
		}
		return nil, &UpstreamError{Remote: name, HTTPStatus: status, Err: &je}
	case e.hasResult:
		return json.RawMessage(e.result), nil
	default:
		return nil, BadReply(name, "reply has neither result nor error")
	}
}

// droppedData stands for error data over maxErrorText.
var droppedData = `"[error data over ` + strconv.Itoa(maxErrorText) + ` bytes dropped]"`

// boundError rebuilds an error object too large to decode whole: its code,
// its message cut to about maxErrorText bytes, and its data unless that is
// over maxErrorText too.
func boundError(obj []byte) []byte {
	b := make([]byte, 0, maxErrorText+256)
	b = append(b, '{')
	if code := jsonscan.Member(obj, "code"); code != nil {
		b = append(b, `"code":`...)
		b = append(b, code...)
		b = append(b, ',')
	}
	if msg := jsonscan.Member(obj, "message"); len(msg) > 1 && msg[0] == '"' {
		b = append(b, `"message":"`...)
		// Whole escapes only, so that the cut string is still JSON.
		for i := 1; i < len(msg)-1 && len(b) < maxErrorText; {
			n := 1
			if msg[i] == '\\' {
				n = 2
				if msg[i+1] == 'u' {
					n = 6
				}
			}
			b = append(b, msg[i:i+n]...)
			i += n
		}
		b = append(b, `...",`...)
	}
	if data := jsonscan.Member(obj, "data"); data != nil {
		b = append(b, `"data":`...)
		if len(data) > maxErrorText {
			data = []byte(droppedData)
		}
		b = append(b, data...)
		b = append(b, ',')
	}
	if b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	return append(b, '}')
}

package fakenode

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/venn-gateway/venn/jrpc"
)

// garbageBody is what SetGarbage answers: an HTML page, as from a
// misconfigured proxy or captive portal.
const garbageBody = "<html>\r\n<head><title>fakenode</title></head>\r\n<body>not json</body>\r\n</html>\r\n"

// Errors of geth's message layer.
var (
	errParse      = &jrpc.Error{Code: jrpc.CodeParseError, Message: "parse error"}
	errInvalidReq = &jrpc.Error{Code: jrpc.CodeInvalidRequest, Message: "invalid request"}
	errEmptyBatch = &jrpc.Error{Code: jrpc.CodeInvalidRequest, Message: "empty batch"}
	errBatchLarge = &jrpc.Error{Code: jrpc.CodeInvalidRequest, Message: "batch too large"}
)

// maxPooledBuf keeps huge request or response buffers out of the pool.
const maxPooledBuf = 1 << 20

// getBuf and putBuf recycle request and response buffers: the node is the
// fast upstream of venn's benchmarks.
func (n *Node) getBuf() *[]byte {
	if b, ok := n.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 4096)
	return &b
}

func (n *Node) putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	n.bufs.Put(b)
}

// ServeHTTP serves JSON-RPC over HTTP POST and WebSocket upgrades on any
// path, as geth does with HTTP and WS on one port.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !n.enter() {
		http.Error(w, "fake node closed", http.StatusServiceUnavailable)
		return
	}
	defer n.wg.Done()
	if isWebsocket(r) {
		n.serveWS(w, r)
		return
	}
	n.headers.note(r)
	n.serveHTTP(w, r)
}

func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

func (n *Node) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := n.faults.Load()

	// geth answers an empty GET (a load balancer's health check) with 200.
	health := r.Method == http.MethodGet && r.ContentLength == 0 && r.URL.RawQuery == ""
	var (
		status    int
		statusMsg string
		msgs      []message
		batch     bool
		parsed    bool
		body      []byte
	)
	reqBuf := n.getBuf()
	defer n.putBuf(reqBuf)
	if !health {
		status, statusMsg = validateRequest(r)
	}
	if !health && status == 0 {
		var err error
		body, err = readBody(r.Body, *reqBuf)
		*reqBuf = body[:0]
		if err != nil {
			return // the client is gone
		}
		if len(bytes.TrimSpace(body)) > 0 {
			var store [1]message
			msgs, batch, parsed = parseBody(body, store[:0])
			n.countMessages(msgs, parsed)
		}
	}

	if !n.delay(ctx, f) {
		dropConn(w) // closing: an empty 200 would look like an answer
		return
	}
	switch {
	case f.drop:
		n.log.Debug("dropping http request")
		dropConn(w)
		return
	case f.failStatus != 0:
		writeFail(w, f)
		return
	case f.garbage:
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, garbageBody)
		return
	case health:
		w.WriteHeader(http.StatusOK)
		return
	case status != 0:
		http.Error(w, statusMsg, status)
		return
	}

	w.Header().Set("Content-Type", "application/json")
	if len(bytes.TrimSpace(body)) == 0 {
		return // geth reads no message and writes nothing
	}
	respBuf := n.getBuf()
	defer n.putBuf(respBuf)
	c := &call{ctx: ctx, view: n.view.Load(), req: r}
	resp := n.answer(c, f, msgs, batch, parsed, (*respBuf)[:0])
	*respBuf = resp[:0]
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
	_, _ = w.Write(resp)
}

// validateRequest is geth's HTTP gate: status 0 when the request may go on.
func validateRequest(r *http.Request) (int, string) {
	if r.Method == http.MethodPut || r.Method == http.MethodDelete {
		return http.StatusMethodNotAllowed, "method not allowed"
	}
	if r.ContentLength > MaxBodyBytes {
		return http.StatusRequestEntityTooLarge,
			"content length too large (" + strconv.FormatInt(r.ContentLength, 10) + ">" + strconv.Itoa(MaxBodyBytes) + ")"
	}
	if r.Method == http.MethodOptions {
		return 0, ""
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil {
		switch mt {
		case "application/json", "application/json-rpc", "application/jsonrequest":
			return 0, ""
		}
	}
	return http.StatusUnsupportedMediaType, "invalid content type, only application/json is supported"
}

// readBody reads at most MaxBodyBytes into buf; a longer body is cut, which
// then fails to parse, as in geth.
func readBody(body io.Reader, buf []byte) ([]byte, error) {
	lr := io.LimitReader(body, MaxBodyBytes)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		k, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// dropConn closes the client's TCP connection without a response.
func dropConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // HTTP/2: the server resets the stream
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

func writeFail(w http.ResponseWriter, f *faults) {
	body := f.failBody
	ct := "text/plain; charset=utf-8"
	switch {
	case body == "":
		body = strconv.Itoa(f.failStatus) + " " + http.StatusText(f.failStatus) + "\n"
	case body[0] == '{' || body[0] == '[':
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(f.failStatus)
	_, _ = io.WriteString(w, body)
}

// call is the context of one request (one HTTP body or one WebSocket
// message, batch or not).
type call struct {
	ctx  context.Context
	view *chainView
	ws   *wsConn // nil over HTTP
	// req is the HTTP request, or the WebSocket handshake (nil in
	// benchmarks of the dispatcher alone).
	req *http.Request
	// subs were created by this request; they start delivering once its
	// answer is queued, so that no notification precedes the subscription
	// id.
	subs []*subscription
}

func (n *Node) countMessages(msgs []message, parsed bool) {
	if !parsed {
		n.count("")
		return
	}
	if len(msgs) == 0 {
		n.count("") // empty batch
	}
	for i := range msgs {
		m := &msgs[i]
		if m.isCall() || m.isNotification() {
			n.count(m.method)
			if tag := firstTag(m.params); tag != "" {
				n.count(m.method + " " + tag)
			}
		} else {
			n.count("")
		}
	}
}

// answer serves the parsed messages of one request and appends the answer
// to buf. It returns buf unchanged when nothing is to be answered
// (notifications only).
func (n *Node) answer(c *call, f *faults, msgs []message, batch, parsed bool, buf []byte) []byte {
	if !parsed {
		return appendError(buf, nil, errParse)
	}
	if !batch {
		return n.answerOne(c, f, &msgs[0], buf)
	}
	switch {
	case len(msgs) == 0:
		return appendError(buf, nil, errEmptyBatch)
	case len(msgs) > MaxBatch:
		var id []byte
		for i := range msgs {
			if msgs[i].isCall() {
				id = msgs[i].id
				break
			}
		}
		buf = append(buf, '[')
		buf = appendError(buf, id, errBatchLarge)
		return append(buf, ']')
	}
	start := len(buf)
	buf = append(buf, '[')
	answered := false
	for i := range msgs {
		mark := len(buf)
		if answered {
			buf = append(buf, ',')
		}
		before := len(buf)
		buf = n.answerOne(c, f, &msgs[i], buf)
		if len(buf) == before {
			buf = buf[:mark] // no answer: drop the comma too
			continue
		}
		answered = true
	}
	if !answered {
		return buf[:start]
	}
	return append(buf, ']')
}

// answerOne serves one message, appending its answer (if any) to buf.
func (n *Node) answerOne(c *call, f *faults, m *message, buf []byte) []byte {
	switch {
	case m.isResponse():
		return buf // geth drops responses it did not ask for
	case m.isNotification():
		n.serveCall(c, f, m.method, m.params)
		return buf
	case m.isCall():
		res, rerr := n.serveCall(c, f, m.method, m.params)
		if rerr != nil {
			return appendError(buf, m.id, rerr)
		}
		return appendResult(buf, m.id, res)
	case m.validID():
		return appendError(buf, m.id, errInvalidReq)
	default:
		return appendError(buf, nil, errInvalidReq)
	}
}

package fakenode

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
)

// Limits, as geth's defaults.
const (
	// MaxBodyBytes is the largest HTTP request body served (413 above).
	MaxBodyBytes = 5 * 1024 * 1024
	// MaxBatch is the longest batch served; a longer one gets geth's
	// one-element "batch too large" answer.
	MaxBatch = 1000
	// MaxWSMessageBytes is the WebSocket read limit.
	MaxWSMessageBytes = 32 * 1024 * 1024
)

// message is one JSON-RPC message picked apart the way geth does it: raw
// fields pointing into the request, strings unescaped only when they carry
// escapes.
type message struct {
	version bool // "jsonrpc":"2.0"
	id      []byte
	method  string
	params  []byte
	answer  bool // has "result" or "error": a response, not a request
}

func (m *message) validID() bool { return len(m.id) > 0 && m.id[0] != '{' && m.id[0] != '[' }

func (m *message) isCall() bool { return m.version && m.validID() && m.method != "" }

func (m *message) isNotification() bool { return m.version && m.id == nil && m.method != "" }

// isResponse is a message a client sent as if answering the server; geth
// drops these silently.
func (m *message) isResponse() bool {
	return m.version && m.validID() && m.method == "" && m.params == nil && m.answer
}

// parseBody splits a request body into messages. It reports batch when the
// body is a JSON array, and ok false when the body is not valid JSON (geth's
// "parse error"). The body must not be empty.
func parseBody(body []byte, dst []message) (msgs []message, batch, ok bool) {
	if !json.Valid(body) {
		return nil, false, false
	}
	i := jsonscan.SkipSpace(body, 0)
	if body[i] != '[' {
		var m message
		fillMessage(body[i:], &m)
		return append(dst, m), false, true
	}
	msgs = dst
	forEachElement(body[i:], func(elem []byte) {
		var m message
		fillMessage(elem, &m)
		msgs = append(msgs, m)
	})
	return msgs, true, true
}

// fillMessage reads the fields of a JSON object. Anything that is not an
// object leaves m zero, which the caller answers as an invalid request.
func fillMessage(obj []byte, m *message) {
	if len(obj) == 0 || obj[0] != '{' {
		return
	}
	forEachField(obj, func(key, value []byte) {
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) != nil {
				return
			}
			key = []byte(k)
		}
		switch string(key) {
		case "jsonrpc":
			m.version = string(value) == `"2.0"` || unquote(value) == "2.0"
		case "id":
			m.id = value
		case "method":
			m.method = unquote(value)
		case "params":
			m.params = value
		case "result", "error":
			m.answer = true
		}
	})
}

// unquote returns the string a JSON string literal holds, or "" for any
// other value.
func unquote(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

func isNull(v []byte) bool { return string(bytes.TrimSpace(v)) == "null" }

// forEachElement calls fn with each element of a valid JSON array.
func forEachElement(arr []byte, fn func(elem []byte)) {
	it := jsonscan.Array{Data: arr, I: 1} // past '['
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		fn(v)
	}
}

// forEachField calls fn with the raw key (without quotes) and value of each
// member of a valid JSON object.
func forEachField(obj []byte, fn func(key, value []byte)) {
	it := jsonscan.Object{Data: obj, I: 1} // past '{'
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		fn(k, v)
	}
}

// splitArgs cuts a params array into at most max elements, as geth's
// positional argument parser: absent or null params mean no arguments, an
// object is "non-array args", more than max is an error, and the first
// required ones (nil = absent) must be present and not null.
func splitArgs(params []byte, dst [][]byte, max, required int) ([][]byte, *jrpc.Error) {
	args := dst[:0]
	p := bytes.TrimSpace(params)
	switch {
	case len(p) == 0 || string(p) == "null":
	case p[0] == '[':
		var tooMany bool
		forEachElement(p, func(elem []byte) {
			if len(args) >= max {
				tooMany = true
				return
			}
			args = append(args, elem)
		})
		if tooMany {
			return nil, invalidParams("too many arguments, want at most " + strconv.Itoa(max))
		}
	default:
		return nil, invalidParams("non-array args")
	}
	for i := 0; i < required; i++ {
		if i >= len(args) || isNull(args[i]) {
			return nil, invalidParams("missing value for required argument " + strconv.Itoa(i))
		}
	}
	for i := range args {
		if isNull(args[i]) {
			args[i] = nil
		}
	}
	for len(args) < max {
		args = append(args, nil)
	}
	return args, nil
}

// appendResult writes a successful answer in geth's field order.
func appendResult(buf, id, result []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"result":`...)
	buf = append(buf, result...)
	return append(buf, '}')
}

// appendError writes an error answer. A nil id is written as null, as geth
// does for messages it could not attribute.
func appendError(buf, id []byte, e *jrpc.Error) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, id...)
	}
	buf = append(buf, `,"error":`...)
	// encoding/json, as geth: same escaping of the message text.
	enc, err := json.Marshal(e)
	if err != nil {
		enc, _ = json.Marshal(&jrpc.Error{Code: e.Code, Message: e.Message})
	}
	buf = append(buf, enc...)
	return append(buf, '}')
}

func invalidParams(msg string) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeInvalidParams, Message: msg}
}

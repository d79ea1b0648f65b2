package jrpc

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/venn-gateway/venn/jsonscan"
)

// Decoding is the hot path of every call, so it does not build a tree:
// jsonscan.Valid checks the syntax once without allocating, then a scanner that
// trusts that check finds the members venn needs and hands out sub-slices of
// the body for id and params. The body is never reused, so handlers may keep
// those slices. Member names are matched case-sensitively (the spec asks for
// it; encoding/json would not).

// item is one decoded entry of a message: a call to serve, or an invalid
// entry answered with err. Answers are filled in place.
type item struct {
	req     Request
	err     *Error // set when invalid, or when the call failed
	result  json.RawMessage
	invalid bool
	note    Note          // what the parts that answered said of it
	took    time.Duration // in the handler
	in, out int           // bytes of the item and of its answer, in a batch
}

// answered reports whether the item gets an answer: every call with an id,
// and every invalid item, which is never taken for a notification.
func (it *item) answered() bool { return it.req.ID != nil || it.invalid }

// decode parses a request message. A non-nil *Error answers the message as a
// whole (with id null): invalid JSON, an empty batch, a top-level value that
// is neither object nor array, or a batch over maxItems.
func decode(data []byte, maxItems int) (items []item, batch bool, werr *Error) {
	if !jsonscan.Valid(data) {
		return nil, false, errParse()
	}
	i := jsonscan.SkipSpace(data, 0)
	switch data[i] {
	case '{':
		items = make([]item, 1)
		decodeItem(data[i:], &items[0])
		return items, false, nil
	case '[':
	default:
		return nil, false, errInvalid("not an object or array")
	}

	n := 0
	elems := jsonscan.Array{Data: data, I: i + 1}
	for {
		v, ok := elems.Next()
		if !ok {
			break
		}
		n++
		if n > maxItems {
			continue // count them all for the error, decode none
		}
		if items == nil {
			items = make([]item, 0, min(batchItemsHint, maxItems))
		}
		items = append(items, item{in: len(v)})
		decodeItem(v, &items[len(items)-1])
	}
	switch {
	case n == 0:
		return nil, true, errEmptyBatch()
	case n > maxItems:
		return nil, true, errBatchTooLarge(n, maxItems)
	}
	return items, true, nil
}

// batchItemsHint is the first allocation for a batch's items: most batches
// fit, bigger ones grow by append.
const batchItemsHint = 16

// decodeItem validates one entry (a complete JSON value) into it.
func decodeItem(raw []byte, it *item) {
	if e := parseItem(raw, &it.req); e != nil {
		it.err, it.invalid = e, true
	}
}

// parseItem fills req from raw, or says why raw is not a valid request. The
// id is kept whenever it is valid, so the error can echo it.
func parseItem(raw []byte, req *Request) *Error {
	if raw[0] != '{' {
		return errInvalid("not an object")
	}
	var version, id, method, params []byte
	members := jsonscan.Object{Data: raw, I: 1}
	for {
		key, val, ok := members.Next()
		if !ok {
			break
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			key = unescapeKey(key)
		}
		// Later duplicates win, as with encoding/json.
		switch string(key) {
		case "jsonrpc":
			version = val
		case "id":
			id = val
		case "method":
			method = val
		case "params":
			params = val
		}
	}

	if id != nil {
		switch id[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'n':
			// 'n' can only start null in valid JSON.
			req.ID = json.RawMessage(id)
		default:
			return errInvalid("id must be a string, number or null")
		}
	}
	if !isVersion(version) {
		return errInvalid(`jsonrpc must be "2.0"`)
	}
	if method == nil || method[0] != '"' {
		return errInvalid("method must be a non-empty string")
	}
	m, ok := unquote(method)
	if !ok || m == "" {
		return errInvalid("method must be a non-empty string")
	}
	req.Method = m
	if params != nil {
		switch params[0] {
		case '[', '{':
			req.Params = json.RawMessage(params)
		case 'n':
			// null is not a structured value, but many client libraries send
			// it for "no params", and geth and every node accept it: treat it
			// as absent rather than fail their calls.
		default:
			return errInvalid("params must be an array or object")
		}
	}
	return nil
}

// isVersion reports whether v is the JSON string "2.0", escaped or not.
func isVersion(v []byte) bool {
	if string(v) == `"2.0"` {
		return true
	}
	if len(v) == 0 || v[0] != '"' {
		return false
	}
	s, ok := unquote(v)
	return ok && s == Version
}

// unquote returns the string value of a valid JSON string. The common case,
// no escapes, costs one string allocation.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// unescapeKey returns the value of an escaped member name ("\u006d..."),
// given without its quotes. It only runs for names with a backslash.
func unescapeKey(key []byte) []byte {
	q := make([]byte, 0, len(key)+2)
	q = append(q, '"')
	q = append(q, key...)
	q = append(q, '"')
	s, ok := unquote(q)
	if !ok {
		return nil
	}
	return []byte(s)
}

package jrpc

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Answers are appended straight into a byte buffer: the id is echoed as the
// client sent it, results and error data are copied byte for byte, never
// re-encoded. Only the error message is quoted here.

// maxPooledBuf keeps a rare huge answer (a trace, a block with every
// receipt) from pinning its buffer in the pool.
const maxPooledBuf = 1 << 20

// appendAnswer appends the answer to it: its error if it has one, else its
// result.
func appendAnswer(buf []byte, it *item) []byte {
	if it.err != nil {
		return appendError(buf, it.req.ID, it.err)
	}
	return appendResult(buf, it.req.ID, it.result)
}

// appendResult appends {"jsonrpc":"2.0","id":<id>,"result":<result>}. A nil
// id is written as null, an empty result as null.
func appendResult(buf, id, result []byte) []byte {
	buf = appendHead(buf, id)
	buf = append(buf, `,"result":`...)
	if len(result) == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, result...)
	}
	return append(buf, '}')
}

// appendError appends {"jsonrpc":"2.0","id":<id>,"error":{...}}.
func appendError(buf, id []byte, e *Error) []byte {
	buf = appendHead(buf, id)
	buf = append(buf, `,"error":{"code":`...)
	buf = strconv.AppendInt(buf, int64(e.Code), 10)
	buf = append(buf, `,"message":`...)
	buf = AppendString(buf, e.Message)
	// Data is raw; a handler that built it badly must not break the whole
	// answer, so invalid data is dropped. This runs only on errors.
	if len(e.Data) > 0 && json.Valid(e.Data) {
		buf = append(buf, `,"data":`...)
		buf = append(buf, e.Data...)
	}
	return append(buf, "}}"...)
}

// appendNotification appends a server-to-client notification:
// {"jsonrpc":"2.0","method":<method>,"params":<params>}.
func appendNotification(buf []byte, method string, params []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","method":`...)
	buf = AppendString(buf, method)
	if len(params) > 0 {
		buf = append(buf, `,"params":`...)
		buf = append(buf, params...)
	}
	return append(buf, '}')
}

func appendHead(buf, id []byte) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		return append(buf, "null"...)
	}
	return append(buf, id...)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// U+2028/U+2029 are escaped, as encoding/json does, so the output is valid
// JSON and safe in a script.
func AppendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\u202`...)
			buf = append(buf, hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

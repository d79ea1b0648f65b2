package reqlog

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxMethod bounds a client's method name in a line, as jrpc's own logs do.
const maxMethod = 64

// appendLine appends e's line: one JSON object and a newline. Fields
// without a value (no batch, no remote, no cache word) are left out.
func (l *Log) appendLine(b []byte, e *entry) []byte {
	b = append(b, `{"time":"`...)
	b = e.start.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, "request_id", e.id)
	b = appendField(b, "chain", e.chain)
	b = appendField(b, "method", clip(e.method, maxMethod))
	b = appendField(b, "transport", e.transport)
	b = appendField(b, "client", client(e))
	if e.batch >= 0 {
		b = appendInt(b, "batch_index", e.batch)
	}
	b = appendField(b, "source", e.note.Source)
	if e.note.Cache != "" {
		b = appendField(b, "cache", e.note.Cache)
	}
	if e.note.Remote != "" {
		b = appendField(b, "remote", e.note.Remote)
	}
	b = appendInt(b, "attempts", e.note.Attempts)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(e.took.Microseconds())/1000, 'f', -1, 64)
	b = appendField(b, "outcome", e.outcome)
	b = appendInt(b, "code", e.code)
	if e.status != 0 {
		b = appendInt(b, "status", e.status)
	}
	b = appendInt(b, "bytes_in", e.in)
	b = appendInt(b, "bytes_out", e.out)
	if l.cfg.Params {
		b = l.appendParams(b, e)
	}
	return append(b, "}\n"...)
}

// appendParams logs params as sent when they fit ParamsMaxBytes, else
// their first ParamsMaxBytes as a string and their size; a raw
// transaction as its hash alone.
func (l *Log) appendParams(b []byte, e *entry) []byte {
	if isRawTx(e.method) {
		if h, ok := l.hashTx(e.params); ok {
			b = appendField(b, "tx_hash", h)
		}
		return b
	}
	p := e.params
	switch {
	case len(p) == 0:
		return b
	case len(p) <= l.cfg.ParamsMaxBytes:
		b = append(b, `,"params":`...)
		return append(b, p...) // jrpc checked it is JSON
	}
	b = appendField(b, "params_clipped", string(p[:l.cfg.ParamsMaxBytes]))
	return appendInt(b, "params_bytes", len(p))
}

// hashTx is the hash of a raw transaction's params, when the log was
// given how to read it.
func (l *Log) hashTx(params json.RawMessage) (string, bool) {
	if l.txHash == nil {
		return "", false
	}
	return l.txHash(params)
}

// client names the caller: by its API key's name, else by its address
// masked to the /24 or /64 it most likely shares with nobody else's
// clients, so a line identifies a client without holding its address.
func client(e *entry) string {
	if e.key != "" {
		return "key:" + e.key
	}
	ip := e.ip
	if !ip.IsValid() {
		ap, err := netip.ParseAddrPort(e.remoteAddr)
		if err != nil {
			return "ip:unknown"
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap().WithZone("")
	bits := 64
	if ip.Is4() {
		bits = 24
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return "ip:unknown"
	}
	return "ip:" + p.String()
}

func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

func appendInt(b []byte, name string, v int) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, int64(v), 10)
}

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced, so that a client's
// method name cannot break the line or forge another.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
		i++ // the usual case: nothing to escape
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

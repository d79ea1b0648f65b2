package jsonscan

import (
	"bytes"
	"encoding/json"
)

// JoinArrays joins JSON arrays in order without decoding their elements:
// the result is one array holding every element of every part. Empty
// arrays and parts that are not arrays are skipped.
func JoinArrays(parts []json.RawMessage) json.RawMessage {
	n := 2
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	first := true
	for _, p := range parts {
		p = bytes.TrimSpace(p)
		if len(p) < 2 || p[0] != '[' {
			continue
		}
		inner := bytes.TrimSpace(p[1 : len(p)-1])
		if len(inner) == 0 {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		out = append(out, inner...)
		first = false
	}
	return append(out, ']')
}

// JoinValues returns the JSON array of values, in order; each value must
// be valid JSON.
func JoinValues(values []json.RawMessage) json.RawMessage {
	n := 2
	for _, v := range values {
		n += len(v) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, v := range values {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	return append(out, ']')
}

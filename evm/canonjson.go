package evm

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/venn-gateway/venn/jsonscan"
)

// The canonical JSON writer: values as encoding/json decodes them (with
// UseNumber) and writes them back with object members in name order and
// no whitespace, read straight from the client's bytes. Everything it is
// given has passed jsonscan.ValidValue. Strings without escapes or bytes
// outside printable ASCII (every hex value, name and tag a client sends)
// are their own text. A string value with an escape is kept as sent: geth
// reads many strings as hex (hexutil, common.Address, in overrides and
// access lists too) from their bytes as sent, and refuses an escaped one,
// so it must never share a key with its unescaped twin. Member names are
// unescaped, as every decoder reads them.

// maxCanonDepth bounds the nesting of params that have a canonical form:
// each level costs a scan of what it holds, so a hostile nesting would
// make the cost quadratic. Real params nest a few levels (a state
// override, a tracer's config); deeper ones are forwarded uncached.
const maxCanonDepth = 32

// member is one object member: its name unescaped, its value as sent.
type member struct{ key, val []byte }

// writeValue appends v, at nesting depth, canonically; ok is false when
// an object holds two names equal but for case, or v nests deeper than
// maxCanonDepth.
func writeValue(b []byte, v []byte, depth int) ([]byte, bool) {
	if (v[0] == '{' || v[0] == '[') && depth >= maxCanonDepth {
		return b, false
	}
	switch v[0] {
	case '"':
		if bytes.IndexByte(v, '\\') >= 0 {
			return append(b, v...), true
		}
		s, _ := text(v)
		return appendQuoted(b, s), true
	case '{':
		return writeObject(b, v, false, depth)
	case '[':
		b = append(b, '[')
		it := jsonscan.Array{Data: v, I: 1}
		for n := 0; ; n++ {
			x, more := it.Next()
			if !more {
				return append(b, ']'), true
			}
			if n > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = writeValue(b, x, depth+1); !ok {
				return b, false
			}
		}
	}
	// A number (kept as sent: 1 and 1.0 are not merged), true, false, null.
	return append(b, v...), true
}

// writeObject appends the object v with its members in name order, the
// last of a repeated name only (as encoding/json fills a map); tx spells
// the members as transaction arguments (writeTxMember).
func writeObject(b []byte, v []byte, tx bool, depth int) ([]byte, bool) {
	var stack [8]member
	ms := stack[:0]
	it := jsonscan.Object{Data: v, I: 1}
	for {
		k, x, more := it.Next()
		if !more {
			break
		}
		key, ok := keyText(k)
		if !ok {
			return b, false
		}
		ms = append(ms, member{key, x})
	}
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	ms = lastOfNames(ms)
	if !foldDistinct(ms) {
		return b, false
	}
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendQuoted(b, m.key), ':')
		var ok bool
		if tx {
			b, ok = writeTxMember(b, m.key, m.val, depth+1)
		} else {
			b, ok = writeValue(b, m.val, depth+1)
		}
		if !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// lastOfNames keeps, of members sorted stably by name, the last of each
// name.
func lastOfNames(ms []member) []member {
	out := ms[:0]
	for i := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i].key, ms[i+1].key) {
			continue
		}
		out = append(out, ms[i])
	}
	return out
}

// foldDistinct reports whether no two names of ms (distinct) are equal
// but for case (EqualFold, which geth's decoder matches field names by).
func foldDistinct(ms []member) bool {
	const pairwise = 16 // below, comparing every pair is cheaper than a map
	if len(ms) <= pairwise {
		for i := range ms {
			for j := i + 1; j < len(ms); j++ {
				if bytes.EqualFold(ms[i].key, ms[j].key) {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]struct{}, len(ms))
	for _, m := range ms {
		f := foldKey(string(m.key))
		if _, dup := seen[f]; dup {
			return false
		}
		seen[f] = struct{}{}
	}
	return true
}

// text is the string v holds, unescaped; ok is false when v is not a
// string.
func text(v []byte) (s []byte, ok bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	if in := v[1 : len(v)-1]; plain(in) {
		return in, true
	}
	var u string
	if json.Unmarshal(v, &u) != nil {
		return nil, false
	}
	return []byte(u), true
}

// keyText is a member name (as jsonscan.Object gives it: unquoted, still
// escaped) unescaped.
func keyText(k []byte) ([]byte, bool) {
	if plain(k) {
		return k, true
	}
	return text(append(append([]byte{'"'}, k...), '"'))
}

// appendQuoted appends s as strconv.Quote spells it.
func appendQuoted(b, s []byte) []byte {
	if plain(s) {
		return append(append(append(b, '"'), s...), '"')
	}
	return strconv.AppendQuote(b, string(s))
}

// plain reports whether s is printable ASCII without quotes or
// backslashes: the same bytes escaped or not, quoted or not.
func plain(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// foldKey maps every rune of s to one rune of its case-folding orbit (the
// least, in lower case when that is an ASCII letter): two strings are
// EqualFold exactly when their fold keys are equal. A key already in that
// form (lowercase ASCII, as JSON-RPC members are) is returned as it is.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		if 'A' <= least && least <= 'Z' {
			least += 'a' - 'A'
		}
		return least
	}, s)
}

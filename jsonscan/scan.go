// Package jsonscan finds the bounds of JSON values without building a tree
// or allocating. The scanners in this file trust input that json.Valid has
// already accepted (on anything else they return garbage but stay in
// bounds, so they are safe on hostile input); those in valid.go check what
// they scan, for input nothing has checked yet. JoinArrays and JoinValues
// (join.go) build arrays from their parts' bytes, without decoding them.
package jsonscan

import "bytes"

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first non-space byte at or after i.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// String returns the offset just past the string whose quote is data[i].
func String(data []byte, i int) int {
	i++
	for i < len(data) {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		// Escaped only if an odd run of backslashes leads up to it.
		k, n := i+j-1, 0
		for k >= i && data[k] == '\\' {
			n++
			k--
		}
		i += j + 1
		if n%2 == 0 {
			return i
		}
	}
	return len(data)
}

// Value returns the offset just past the value starting at data[i].
func Value(data []byte, i int) int {
	if i >= len(data) {
		return len(data)
	}
	switch data[i] {
	case '"':
		return String(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = String(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(data)
	default:
		// A number, true, false or null: up to the next delimiter.
		for ; i < len(data); i++ {
			switch c := data[i]; {
			case c == ',' || c == '}' || c == ']' || IsSpace(c):
				return i
			}
		}
		return len(data)
	}
}

// Array walks the elements of an array; I starts just past the '['.
type Array struct {
	Data []byte
	I    int
}

// Next returns the next element.
func (it *Array) Next() ([]byte, bool) {
	i := SkipSpace(it.Data, it.I)
	if i < len(it.Data) && it.Data[i] == ',' {
		i = SkipSpace(it.Data, i+1)
	}
	if i >= len(it.Data) || it.Data[i] == ']' {
		it.I = len(it.Data)
		return nil, false
	}
	end := Value(it.Data, i)
	it.I = end
	return it.Data[i:end], true
}

// Object walks the members of an object; I starts just past the '{'.
type Object struct {
	Data []byte
	I    int
}

// Next returns a member's name (without quotes, still escaped) and value.
func (it *Object) Next() (key, val []byte, ok bool) {
	d := it.Data
	i := SkipSpace(d, it.I)
	if i < len(d) && d[i] == ',' {
		i = SkipSpace(d, i+1)
	}
	if i >= len(d) || d[i] != '"' {
		it.I = len(d)
		return nil, nil, false
	}
	keyEnd := String(d, i)
	key = d[i+1 : max(i+1, keyEnd-1)]
	i = SkipSpace(d, keyEnd)
	if i >= len(d) || d[i] != ':' {
		it.I = len(d)
		return nil, nil, false
	}
	i = SkipSpace(d, i+1)
	end := Value(d, i)
	it.I = end
	if i >= end {
		return nil, nil, false
	}
	return key, d[i:end], true
}

// Member returns the raw value of key in the JSON object obj (key compared
// as written, escapes included), or nil when obj is not an object or has no
// such member.
func Member(obj []byte, key string) []byte {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil
	}
	it := Object{Data: obj, I: i + 1}
	for {
		k, v, ok := it.Next()
		if !ok {
			return nil
		}
		if string(k) == key {
			return v
		}
	}
}

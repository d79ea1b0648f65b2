package evm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/venn-gateway/venn/jsonscan"
)

// RefKind is what a block parameter names.
type RefKind uint8

const (
	RefNone RefKind = iota // absent: the method's default (latest)
	RefNumber
	RefLatest
	RefPending
	RefSafe
	RefFinalized
	RefEarliest
	RefHash
)

func tag(s []byte) (RefKind, bool) {
	switch string(s) {
	case "latest":
		return RefLatest, true
	case "safe":
		return RefSafe, true
	case "finalized":
		return RefFinalized, true
	case "earliest":
		return RefEarliest, true
	case "pending":
		return RefPending, true
	}
	return 0, false
}

// BlockRef is a parsed block parameter: a number, a tag, or a hash.
type BlockRef struct {
	Kind   RefKind
	Number uint64 // for RefNumber
	Hash   string // for RefHash, as sent
}

var errBadBlock = errors.New("invalid block parameter")

// ParseBlockRef reads a block number ("0x1b4"), a tag ("latest"), or an
// EIP-1898 object ({"blockNumber":...} / {"blockHash":...}).
func ParseBlockRef(raw json.RawMessage) (BlockRef, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return BlockRef{Kind: RefNone}, nil
	}
	switch raw[0] {
	case '"':
		if s, ok := plainString(raw); ok && utf8.Valid(s) {
			// What Unquote would return, read without copying it.
			return parseBlockBytes(s)
		}
		s, err := strconv.Unquote(string(raw))
		if err != nil {
			return BlockRef{}, errBadBlock
		}
		return parseBlockString(s)
	case '{':
		var obj struct {
			BlockNumber *string `json:"blockNumber"`
			BlockHash   *string `json:"blockHash"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return BlockRef{}, errBadBlock
		}
		switch {
		case obj.BlockHash != nil:
			return BlockRef{Kind: RefHash, Hash: *obj.BlockHash}, nil
		case obj.BlockNumber != nil:
			return parseBlockString(*obj.BlockNumber)
		}
	}
	return BlockRef{}, errBadBlock
}

// parseBlockBytes is parseBlockString on bytes: it allocates only the
// hash it returns.
func parseBlockBytes(s []byte) (BlockRef, error) {
	if k, ok := tag(s); ok {
		return BlockRef{Kind: k}, nil
	}
	if len(s) == 66 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return BlockRef{Kind: RefHash, Hash: string(s)}, nil
	}
	// ParseQuantity's rule: 0x or 0X and 1 to 16 hex digits.
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || len(s) > 18 {
		return BlockRef{}, errBadBlock
	}
	var n uint64
	for _, c := range s[2:] {
		v := unhex(c)
		if v > 15 {
			return BlockRef{}, errBadBlock
		}
		n = n<<4 | uint64(v)
	}
	return BlockRef{Kind: RefNumber, Number: n}, nil
}

func parseBlockString(s string) (BlockRef, error) {
	switch s {
	case "latest":
		return BlockRef{Kind: RefLatest}, nil
	case "pending":
		return BlockRef{Kind: RefPending}, nil
	case "safe":
		return BlockRef{Kind: RefSafe}, nil
	case "finalized":
		return BlockRef{Kind: RefFinalized}, nil
	case "earliest":
		return BlockRef{Kind: RefEarliest}, nil
	}
	if len(s) == 66 && (s[:2] == "0x" || s[:2] == "0X") {
		return BlockRef{Kind: RefHash, Hash: s}, nil
	}
	n, err := ParseQuantity(s)
	if err != nil {
		return BlockRef{}, errBadBlock
	}
	return BlockRef{Kind: RefNumber, Number: n}, nil
}

// ParseQuantity reads a 0x-prefixed hex quantity that fits in 64 bits.
func ParseQuantity(s string) (uint64, error) {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || len(s) > 18 {
		return 0, errors.New("invalid quantity")
	}
	return strconv.ParseUint(s[2:], 16, 64)
}

// Quantity encodes n as a 0x-prefixed hex quantity.
func Quantity(n uint64) string {
	return "0x" + strconv.FormatUint(n, 16)
}

// Param returns the i-th element of a positional params array, or nil when
// params is not an array or is too short.
func Param(params json.RawMessage, i int) json.RawMessage {
	// params came through a decoder that checked its syntax; the scanner
	// stays in bounds on anything else, and callers parse what it returns.
	j := jsonscan.SkipSpace(params, 0)
	if j >= len(params) || params[j] != '[' {
		return nil
	}
	elems := jsonscan.Array{Data: params, I: j + 1}
	for n := 0; ; n++ {
		v, ok := elems.Next()
		if !ok {
			return nil
		}
		if n == i {
			return json.RawMessage(v)
		}
	}
}

// WithParam returns params with its i-th positional element replaced by
// val, every other byte kept as sent; ok is false when params has no i-th
// element.
func WithParam(params json.RawMessage, i int, val string) (json.RawMessage, bool) {
	j := jsonscan.SkipSpace(params, 0)
	if j >= len(params) || params[j] != '[' {
		return nil, false
	}
	elems := jsonscan.Array{Data: params, I: j + 1}
	for n := 0; ; n++ {
		v, ok := elems.Next()
		if !ok {
			return nil, false
		}
		if n == i {
			end := elems.I
			start := end - len(v)
			out := make([]byte, 0, len(params)-len(v)+len(val))
			out = append(out, params[:start]...)
			out = append(out, val...)
			return append(out, params[end:]...), true
		}
	}
}

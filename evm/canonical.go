package evm

import (
	"bytes"
	"math"

	"github.com/venn-gateway/venn/jsonscan"
)

// Canonical is a call's params in one spelling per meaning, for the
// response cache's key: two calls geth reads the same way share it, two it
// reads differently never do. Key order, whitespace, escapes in member
// names, the case of hex and addresses, and the form of the block param (a
// string, or an EIP-1898 object) are spelling; every other difference is
// kept. Only what geth reads identically is merged: geth's hex decoders
// (hexutil, common.Address and common.Hash, as UnmarshalJSON) read a
// value's bytes as sent, so a string value with an escape ("\u0030x…")
// and a quantity with leading zeros ("0x01") are refused there (-32602),
// and here kept as sent, never the key of their valid twins. Where a
// value does not read as its shape says (an address of the wrong length, a
// quantity that is not hex) it is kept as sent too: it then matches only
// the same spelling.
type Canonical struct {
	// Params is the canonical encoding of the params with the block param
	// left out (written as @): the block is the cache's to resolve.
	Params []byte
	// Block is the block the call reads: a number, a tag, or RefHash with
	// Hash lowercase; RefNone when absent or null.
	Block BlockRef
	// RequireCanonical is an EIP-1898 hash's requireCanonical.
	RequireCanonical bool
}

// txQuantities and txAddresses are the transaction arguments (geth's
// TransactionArgs) spelt as quantities and addresses; data and input are
// bytes. Any other member is kept as JSON.
var (
	txQuantities = []string{"gas", "gasPrice", "maxFeePerGas", "maxPriorityFeePerGas",
		"maxFeePerBlobGas", "value", "nonce", "chainId", "type"}
	txAddresses = []string{"from", "to"}
)

// Canonical returns the call's params in their canonical spelling; ok is
// false when they are not a positional array of JSON, when the block param
// does not read, or when an object has two members whose names differ only
// in case (geth's decoder folds them onto one field, and which one wins is
// a question of order that the canonical form does not keep). It reads the
// params as encoding/json would (a repeated name: the last one; strings
// unescaped, invalid UTF-8 as U+FFFD) without decoding them into maps: it
// is on every cache hit's path.
func (c *Call) Canonical() (Canonical, bool) {
	return c.AppendCanonical(make([]byte, 0, len(c.Params)))
}

// AppendCanonical is Canonical with the params appended to dst, which a
// caller's buffer on its stack can be: the cache's key costs no
// allocation.
func (c *Call) AppendCanonical(dst []byte) (Canonical, bool) {
	var out Canonical
	p := c.Params
	if c.BlockAt < 0 || !jsonscan.Valid(p) {
		return out, false
	}
	i := jsonscan.SkipSpace(p, 0)
	if p[i] == 'n' {
		// null: no params, as encoding/json reads it into a slice.
		return Canonical{Params: append(dst, "[]"...)}, true
	}
	if p[i] != '[' {
		return out, false
	}
	shapes := c.Row.shapes
	b := append(dst, '[')
	it := jsonscan.Array{Data: p, I: i + 1}
	for n := 0; ; n++ {
		v, more := it.Next()
		if !more {
			break
		}
		if n > 0 {
			b = append(b, ',')
		}
		shape := argJSON
		if n < len(shapes) {
			shape = shapes[n]
		}
		if n == c.BlockAt {
			shape = argBlock
		}
		var ok bool
		if shape == argBlock {
			out.Block, out.RequireCanonical, ok = readBlock(v)
			b = append(b, '@')
		} else {
			b, ok = writeArg(b, v, shape)
		}
		if !ok {
			return Canonical{}, false
		}
	}
	out.Params = append(b, ']')
	return out, true
}

// writeArg appends v (a valid JSON value) in the canonical spelling of its
// shape.
func writeArg(b []byte, v []byte, shape argShape) ([]byte, bool) {
	const depth = 1 // in the params' array
	switch shape {
	case argAddress:
		return writeAddress(b, v, depth)
	case argSlot:
		if s, ok := plainString(v); ok {
			if d, ok := slotDigits(s); ok {
				b = append(b, `"0x`...)
				b = append(b, "0000000000000000000000000000000000000000000000000000000000000000"[:64-len(d)]...)
				return append(appendLower(b, d), '"'), true
			}
		}
	case argTx:
		if v[0] == '{' {
			return writeObject(b, v, true, depth)
		}
	}
	return writeValue(b, v, depth)
}

// writeTxMember appends the value of a transaction argument's member
// named key.
func writeTxMember(b []byte, key, v []byte, depth int) ([]byte, bool) {
	switch {
	case isOneOf(key, txQuantities):
		return writeQuantity(b, v, depth)
	case isOneOf(key, txAddresses):
		return writeAddress(b, v, depth)
	case string(key) == "data" || string(key) == "input":
		if s, ok := plainString(v); ok && len(s)%2 == 0 && isHexLen(s, -1) {
			return append(appendLower(append(b, `"0x`...), s[2:]), '"'), true
		}
	}
	return writeValue(b, v, depth)
}

func isOneOf(key []byte, names []string) bool {
	for _, n := range names {
		if string(key) == n {
			return true
		}
	}
	return false
}

// writeAddress spells a 20-byte address in lowercase; anything else
// (escaped too: geth refuses it) as sent.
func writeAddress(b []byte, v []byte, depth int) ([]byte, bool) {
	if s, ok := plainString(v); ok && isHexLen(s, 40) {
		return append(appendLower(append(b, `"0x`...), s[2:]), '"'), true
	}
	return writeValue(b, v, depth)
}

// maxQuantityDigits is the widest quantity geth reads (hexutil.Big: 256
// bits), in hex digits.
const maxQuantityDigits = 64

// writeQuantity spells a hex quantity in lowercase; anything else as
// sent: leading zeros and escapes too, which geth's hexutil refuses.
func writeQuantity(b []byte, v []byte, depth int) ([]byte, bool) {
	s, ok := plainString(v)
	if !ok || len(s) == 2 || !isHexLen(s, -1) {
		return writeValue(b, v, depth)
	}
	d := s[2:]
	if len(d) > maxQuantityDigits || len(d) > 1 && d[0] == '0' {
		return writeValue(b, v, depth)
	}
	return append(appendLower(append(b, `"0x`...), d), '"'), true
}

// slotDigits are a storage slot's hex digits as eth_getStorageAt reads it
// (geth's decodeStorageKey: an optional 0x, odd lengths padded, at most 32
// bytes).
func slotDigits(s []byte) ([]byte, bool) {
	d := s
	if len(d) >= 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X') {
		d = d[2:]
	}
	for _, c := range d {
		if unhex(c) > 15 {
			return nil, false
		}
	}
	return d, len(d) <= 64
}

// readBlock reads a block param (a valid JSON value) as geth's
// BlockNumberOrHash does: a tag, a number (no leading zeros, at most
// MaxInt64), a hash, or an EIP-1898 object with exactly one of blockNumber
// and blockHash (names matched regardless of case, as geth's decoder
// matches them) and no member geth would ignore. A value with an escape
// does not read (geth's BlockNumber and Hash refuse it in an object; a
// plain string it would read, but no key is worth the doubt).
func readBlock(v []byte) (ref BlockRef, requireCanonical, ok bool) {
	switch v[0] {
	case 'n':
		return BlockRef{Kind: RefNone}, false, true
	case '"':
		s, isStr := plainString(v)
		if !isStr {
			return BlockRef{}, false, false
		}
		ref, ok := readBlockString(s)
		return ref, false, ok
	case '{':
		return readBlockObject(v)
	}
	return BlockRef{}, false, false
}

// blockMembers are an EIP-1898 object's member names.
var blockMembers = [...][]byte{[]byte("blockNumber"), []byte("blockHash"), []byte("requireCanonical")}

// readBlockObject reads an EIP-1898 object; a name repeated exactly is its
// last value, two spellings of one name (in case) are refused.
func readBlockObject(v []byte) (BlockRef, bool, bool) {
	var names, vals [len(blockMembers)][]byte
	it := jsonscan.Object{Data: v, I: 1}
	for {
		rawKey, x, more := it.Next()
		if !more {
			break
		}
		key, ok := keyText(rawKey)
		j := 0
		for j < len(blockMembers) && !bytes.EqualFold(key, blockMembers[j]) {
			j++
		}
		if !ok || j == len(blockMembers) || names[j] != nil && string(names[j]) != string(key) {
			return BlockRef{}, false, false
		}
		names[j], vals[j] = key, x
	}
	number, hash, rc := vals[0], vals[1], vals[2]
	if rc != nil && rc[0] == 'n' {
		rc = nil // null: absent
	}
	if (number != nil) == (hash != nil) {
		return BlockRef{}, false, false
	}
	if number != nil {
		s, isStr := plainString(number)
		if ref, ok := readBlockString(s); isStr && ok && ref.Kind != RefHash && rc == nil {
			return ref, false, true
		}
		return BlockRef{}, false, false
	}
	s, isStr := plainString(hash)
	if !isStr || rc != nil && rc[0] != 't' && rc[0] != 'f' || !isHexLen(s, 64) {
		return BlockRef{}, false, false
	}
	return BlockRef{Kind: RefHash, Hash: lowerHash(s)}, rc != nil && rc[0] == 't', true
}

// readBlockString reads a tag, a 32-byte hash or a hex number as geth's
// hexutil.DecodeUint64 does (no leading zeros), at most MaxInt64.
func readBlockString(s []byte) (BlockRef, bool) {
	if k, ok := tag(s); ok {
		return BlockRef{Kind: k}, true
	}
	if len(s) == HashLen {
		if !isHexLen(s, 64) {
			return BlockRef{}, false
		}
		return BlockRef{Kind: RefHash, Hash: lowerHash(s)}, true
	}
	n, ok := hexQuantity(s)
	if !ok || n > math.MaxInt64 {
		return BlockRef{}, false
	}
	return BlockRef{Kind: RefNumber, Number: n}, true
}

// lowerHash is a hash (0x and 64 hex digits) as BlockRef.Hash holds it.
func lowerHash(s []byte) string {
	var h [HashLen]byte
	copy(h[:2], "0x")
	appendLower(h[2:2], s[2:])
	return string(h[:])
}

// appendLower appends s with its ASCII letters in lowercase.
func appendLower(b, s []byte) []byte {
	for _, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

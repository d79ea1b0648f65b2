package evm

import (
	"encoding/json"
	"math"

	"github.com/venn-gateway/venn/jsonscan"
)

// The Arg readers read client params exactly as geth (v1.17.10) does, for
// stores that answer only when they can give the node's own answer:
// quantities with leading zeros, escaped strings, params of the wrong count
// or type, all read false, and the caller forwards the call so the node
// produces its own error or answer. ParseBlockRef and ParseQuantity are
// more lenient and accept some of those.

// Lengths of 0x-prefixed hex strings.
const (
	HashLen    = 2 + 64 // a 32-byte hash
	AddressLen = 2 + 40 // a 20-byte address
)

// Args splits params into exactly len(out) positional arguments, as geth
// requires (it refuses both missing and extra ones; absent or null params
// are no arguments). Named params are left to the node.
func Args(params []byte, out [][]byte) bool {
	i := jsonscan.SkipSpace(params, 0)
	if i >= len(params) || params[i] == 'n' {
		return len(out) == 0
	}
	if params[i] != '[' {
		return false
	}
	it := jsonscan.Array{Data: params, I: i + 1}
	n := 0
	for {
		v, ok := it.Next()
		if !ok {
			return n == len(out)
		}
		if n == len(out) {
			return false
		}
		out[n] = v
		n++
	}
}

// ArgBlockNumber reads a param as geth's rpc.BlockNumber: a tag or a hex
// quantity without leading zeros, at most MaxInt64.
func ArgBlockNumber(raw []byte) (BlockRef, bool) {
	s, ok := plainString(raw)
	if !ok {
		return BlockRef{}, false
	}
	if k, ok := tag(s); ok {
		return BlockRef{Kind: k}, true
	}
	n, ok := hexQuantity(s)
	if !ok || n > math.MaxInt64 {
		return BlockRef{}, false
	}
	return BlockRef{Kind: RefNumber, Number: n}, true
}

// ArgBlockNumberOrHash reads a param as geth's rpc.BlockNumberOrHash: a
// tag, a number, a 66-character hash, or an EIP-1898 object. A hash is put
// in key, lowercase (the returned ref's Hash is left empty). For an
// EIP-1898 hash, requireCanonical is checked but not reported: every venn
// store holds canonical blocks only.
func ArgBlockNumberOrHash(raw []byte, key *[HashLen]byte) (BlockRef, bool) {
	if len(raw) > 0 && raw[0] == '{' {
		return blockObject(raw, key)
	}
	s, ok := plainString(raw)
	if !ok {
		return BlockRef{}, false
	}
	if len(s) == HashLen {
		if !ArgHash(raw, key) {
			return BlockRef{}, false
		}
		return BlockRef{Kind: RefHash}, true
	}
	return ArgBlockNumber(raw)
}

// blockObject reads an EIP-1898 object with encoding/json, as geth does,
// so that member names match the same way; it is rare, so it may allocate.
func blockObject(raw []byte, key *[HashLen]byte) (BlockRef, bool) {
	var obj struct {
		BlockNumber      *json.RawMessage `json:"blockNumber"`
		BlockHash        *json.RawMessage `json:"blockHash"`
		RequireCanonical *json.RawMessage `json:"requireCanonical"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return BlockRef{}, false
	}
	if rc := obj.RequireCanonical; rc != nil && string(*rc) != "true" && string(*rc) != "false" {
		return BlockRef{}, false
	}
	switch {
	case obj.BlockNumber != nil && obj.BlockHash != nil:
		return BlockRef{}, false
	case obj.BlockNumber != nil:
		return ArgBlockNumber(*obj.BlockNumber)
	case obj.BlockHash != nil:
		if !ArgHash(*obj.BlockHash, key) {
			return BlockRef{}, false
		}
		return BlockRef{Kind: RefHash}, true
	}
	return BlockRef{}, false
}

// ArgHash reads a 32-byte hex string (0x or 0X, any case) into key,
// lowercased.
func ArgHash(raw []byte, key *[HashLen]byte) bool {
	if !isHex(raw, HashLen) {
		return false
	}
	key[0], key[1] = '0', 'x'
	for i := 2; i < HashLen; i++ {
		c := raw[i+1]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		key[i] = c
	}
	return true
}

// ArgQuantity reads a JSON string as geth's hexutil.Uint64: 0x or 0X, 1 to
// 16 digits, no leading zero, no escapes.
func ArgQuantity(raw []byte) (uint64, bool) {
	s, ok := plainString(raw)
	if !ok {
		return 0, false
	}
	return hexQuantity(s)
}

package evm

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Canonical is a call's params in one spelling per meaning, for the
// response cache's key: two calls geth reads the same way share it, two it
// reads differently never do. Key order, whitespace, string escapes, the
// case of hex and addresses, leading zeros of quantities and the form of
// the block param (a string, or an EIP-1898 object) are spelling; every
// other difference is kept. Where a value does not read as its shape says
// (an address of the wrong length, a quantity that is not hex) it is kept
// as sent: it then matches only the same spelling.
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

// argShape is what one positional param of a method holds, for its
// canonical spelling.
type argShape uint8

const (
	argJSON    argShape = iota // any JSON: key order and whitespace only
	argAddress                 // a 20-byte address: case
	argSlot                    // a storage slot as eth_getStorageAt reads it: padded to 32 bytes
	argTx                      // transaction arguments (eth_call's first param)
	argBlock                   // the block: read into Canonical.Block
)

// argShapes are the methods whose params have more than a block to
// normalize. The storage keys of eth_getProof stay as sent: geth's answer
// repeats them as spelt.
var argShapes = map[string][]argShape{
	"eth_call":                {argTx, argBlock},
	"eth_estimateGas":         {argTx, argBlock},
	"eth_createAccessList":    {argTx, argBlock},
	"debug_traceCall":         {argTx, argBlock},
	"trace_call":              {argTx, argJSON, argBlock},
	"eth_getBalance":          {argAddress, argBlock},
	"eth_getCode":             {argAddress, argBlock},
	"eth_getTransactionCount": {argAddress, argBlock},
	"eth_getStorageAt":        {argAddress, argSlot, argBlock},
	"eth_getProof":            {argAddress, argJSON, argBlock},
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
// a question of order that the canonical form does not keep).
func (c *Call) Canonical() (Canonical, bool) {
	var out Canonical
	if c.BlockAt < 0 {
		return out, false
	}
	dec := json.NewDecoder(bytes.NewReader(c.Params))
	dec.UseNumber()
	var params []any
	if err := dec.Decode(&params); err != nil || dec.More() {
		return out, false
	}
	shapes := argShapes[c.Method]
	b := append(make([]byte, 0, len(c.Params)), '[')
	for i, v := range params {
		if i > 0 {
			b = append(b, ',')
		}
		shape := argJSON
		if i < len(shapes) {
			shape = shapes[i]
		}
		if i == c.BlockAt {
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

// writeArg appends v in the canonical spelling of its shape.
func writeArg(b []byte, v any, shape argShape) ([]byte, bool) {
	switch shape {
	case argAddress:
		return writeJSON(b, canonAddress(v))
	case argSlot:
		return writeJSON(b, slot(v))
	case argTx:
		obj, isObj := v.(map[string]any)
		if !isObj {
			return writeJSON(b, v)
		}
		tx := make(map[string]any, len(obj))
		for k, x := range obj {
			switch {
			case slices.Contains(txQuantities, k):
				x = canonQuantity(x)
			case slices.Contains(txAddresses, k):
				x = canonAddress(x)
			case k == "data" || k == "input":
				x = hexBytes(x)
			}
			tx[k] = x
		}
		return writeJSON(b, tx)
	}
	return writeJSON(b, v)
}

// readBlock reads a block param as geth's BlockNumberOrHash does, but for
// leading zeros in a number (spelling, here): a tag, a number, a hash, or
// an EIP-1898 object with exactly one of blockNumber and blockHash (names
// matched regardless of case, as geth's decoder matches them) and no
// member geth would ignore.
func readBlock(v any) (ref BlockRef, requireCanonical, ok bool) {
	switch v := v.(type) {
	case nil:
		return BlockRef{Kind: RefNone}, false, true
	case string:
		ref, ok := readBlockString(v)
		return ref, false, ok
	case map[string]any:
		var number, hash, rc any
		var hasNumber, hasHash bool
		for k, x := range v {
			switch {
			case strings.EqualFold(k, "blockNumber"):
				number, hasNumber = x, true
			case strings.EqualFold(k, "blockHash"):
				hash, hasHash = x, true
			case strings.EqualFold(k, "requireCanonical"):
				rc = x
			default:
				return BlockRef{}, false, false
			}
		}
		if !foldUnique(v) || hasNumber == hasHash {
			return BlockRef{}, false, false
		}
		if hasNumber {
			s, isStr := number.(string)
			if ref, ok := readBlockString(s); isStr && ok && ref.Kind != RefHash && rc == nil {
				return ref, false, true
			}
			return BlockRef{}, false, false
		}
		s, isStr := hash.(string)
		req, isBool := rc.(bool)
		if !isStr || rc != nil && !isBool || !isHexLen(s, 64) {
			return BlockRef{}, false, false
		}
		return BlockRef{Kind: RefHash, Hash: "0x" + strings.ToLower(s[2:])}, req, true
	}
	return BlockRef{}, false, false
}

// readBlockString reads a tag, a 32-byte hash or a hex number of at most
// 64 bits.
func readBlockString(s string) (BlockRef, bool) {
	if k, ok := tag([]byte(s)); ok {
		return BlockRef{Kind: k}, true
	}
	if len(s) == HashLen {
		if !isHexLen(s, 64) {
			return BlockRef{}, false
		}
		return BlockRef{Kind: RefHash, Hash: "0x" + strings.ToLower(s[2:])}, true
	}
	if !isHexLen(s, -1) || len(s) == 2 {
		return BlockRef{}, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		return BlockRef{}, false
	}
	return BlockRef{Kind: RefNumber, Number: n}, true
}

// isHexLen reports whether s is 0x or 0X and n hex digits (n < 0: any
// number).
func isHexLen(s string, n int) bool {
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

// canonAddress spells a 20-byte address in lowercase; anything else as sent.
func canonAddress(v any) any {
	if s, ok := v.(string); ok && isHexLen(s, 40) {
		return "0x" + strings.ToLower(s[2:])
	}
	return v
}

// maxQuantityBits is the widest quantity geth reads (hexutil.Big).
const maxQuantityBits = 256

// canonQuantity spells a hex quantity without leading zeros, in lowercase;
// anything else as sent.
func canonQuantity(v any) any {
	s, ok := v.(string)
	if !ok || len(s) == 2 || !isHexLen(s, -1) {
		return v
	}
	n, ok := new(big.Int).SetString(s[2:], 16)
	if !ok || n.BitLen() > maxQuantityBits {
		return v
	}
	return "0x" + n.Text(16)
}

// hexBytes spells hex bytes in lowercase; anything else as sent.
func hexBytes(v any) any {
	if s, ok := v.(string); ok && len(s)%2 == 0 && isHexLen(s, -1) {
		return "0x" + strings.ToLower(s[2:])
	}
	return v
}

// slot spells a storage slot as eth_getStorageAt reads it (geth's
// decodeStorageKey: an optional 0x, odd lengths padded, at most 32 bytes)
// as 32 bytes in lowercase; anything else as sent.
func slot(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	d := s
	if len(d) >= 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X') {
		d = d[2:]
	}
	if len(d) > 64 || !isHexLen("0x"+d, -1) {
		return v
	}
	return "0x" + strings.Repeat("0", 64-len(d)) + strings.ToLower(d)
}

// writeJSON appends v (as encoding/json decodes with UseNumber) with
// object members in name order and no whitespace; ok is false when an
// object holds two names equal but for case.
func writeJSON(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, v), true
	case json.Number:
		// Kept as sent: 1 and 1.0 are not merged.
		return append(b, v...), true
	case string:
		return strconv.AppendQuote(b, v), true
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = writeJSON(b, x); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if !foldUnique(v) {
			return b, false
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(strconv.AppendQuote(b, k), ':')
			var ok bool
			if b, ok = writeJSON(b, v[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// foldUnique reports whether no two names of obj are equal but for case
// (strings.EqualFold, which geth's decoder matches field names by).
func foldUnique(obj map[string]any) bool {
	if len(obj) < 2 {
		return true
	}
	seen := make(map[string]struct{}, len(obj))
	for k := range obj {
		f := foldKey(k)
		if _, dup := seen[f]; dup {
			return false
		}
		seen[f] = struct{}{}
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

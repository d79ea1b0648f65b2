package evm

import (
	"bytes"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The reference canonicalizer: Canonical as first written, on
// encoding/json's maps, slow but plain. FuzzCanonicalReference holds the
// scanner to its answers.

// Canonical returns the call's params in their canonical spelling; ok is
// false when they are not a positional array of JSON, when the block param
// does not read, or when an object has two members whose names differ only
// in case (geth's decoder folds them onto one field, and which one wins is
// a question of order that the canonical form does not keep).
func refCanonical(c *Call) (Canonical, bool) {
	var out Canonical
	if c.BlockAt < 0 {
		return out, false
	}
	dec := json.NewDecoder(bytes.NewReader(c.Params))
	var raws []json.RawMessage
	if err := dec.Decode(&raws); err != nil || dec.More() {
		return out, false
	}
	params := make([]any, len(raws))
	for i, r := range raws {
		params[i] = refDecode(r)
	}
	shapes := c.Row.shapes
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
			out.Block, out.RequireCanonical, ok = refReadBlock(v)
			b = append(b, '@')
		} else {
			b, ok = refWriteArg(b, v, shape)
		}
		if !ok {
			return Canonical{}, false
		}
	}
	out.Params = append(b, ']')
	return out, true
}

// refRaw is a string value with an escape, as sent: geth's hex decoders
// refuse it, so it is never merged with its unescaped twin.
type refRaw string

// refDecode decodes v (valid JSON) as encoding/json does with UseNumber,
// but for strings with an escape, which it keeps as sent (refRaw).
func refDecode(v json.RawMessage) any {
	v = bytes.TrimSpace(v)
	switch v[0] {
	case '{':
		var m map[string]json.RawMessage
		_ = json.Unmarshal(v, &m)
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = refDecode(x)
		}
		return out
	case '[':
		var a []json.RawMessage
		_ = json.Unmarshal(v, &a)
		out := make([]any, len(a))
		for i, x := range a {
			out[i] = refDecode(x)
		}
		return out
	case '"':
		if bytes.IndexByte(v, '\\') >= 0 {
			return refRaw(v)
		}
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	case 't', 'f':
		return v[0] == 't'
	case 'n':
		return nil
	}
	return json.Number(v)
}

// writeArg appends v in the canonical spelling of its shape.
func refWriteArg(b []byte, v any, shape argShape) ([]byte, bool) {
	switch shape {
	case argAddress:
		return refWriteJSON(b, refCanonAddress(v))
	case argSlot:
		return refWriteJSON(b, refSlot(v))
	case argTx:
		obj, isObj := v.(map[string]any)
		if !isObj {
			return refWriteJSON(b, v)
		}
		tx := make(map[string]any, len(obj))
		for k, x := range obj {
			switch {
			case slices.Contains(txQuantities, k):
				x = refCanonQuantity(x)
			case slices.Contains(txAddresses, k):
				x = refCanonAddress(x)
			case k == "data" || k == "input":
				x = refHexBytes(x)
			}
			tx[k] = x
		}
		return refWriteJSON(b, tx)
	}
	return refWriteJSON(b, v)
}

// readBlock reads a block param as geth's BlockNumberOrHash does, but for
// leading zeros in a number (spelling, here): a tag, a number, a hash, or
// an EIP-1898 object with exactly one of blockNumber and blockHash (names
// matched regardless of case, as geth's decoder matches them) and no
// member geth would ignore.
func refReadBlock(v any) (ref BlockRef, requireCanonical, ok bool) {
	switch v := v.(type) {
	case nil:
		return BlockRef{Kind: RefNone}, false, true
	case string:
		ref, ok := refReadBlockString(v)
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
		if !refFoldUnique(v) || hasNumber == hasHash {
			return BlockRef{}, false, false
		}
		if hasNumber {
			s, isStr := number.(string)
			if ref, ok := refReadBlockString(s); isStr && ok && ref.Kind != RefHash && rc == nil {
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
func refReadBlockString(s string) (BlockRef, bool) {
	if k, ok := tag([]byte(s)); ok {
		return BlockRef{Kind: k}, true
	}
	if len(s) == HashLen {
		if !isHexLen(s, 64) {
			return BlockRef{}, false
		}
		return BlockRef{Kind: RefHash, Hash: "0x" + strings.ToLower(s[2:])}, true
	}
	if !isHexLen(s, -1) || len(s) == 2 || len(s) > 3 && s[2] == '0' {
		return BlockRef{}, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 63)
	if err != nil {
		return BlockRef{}, false
	}
	return BlockRef{Kind: RefNumber, Number: n}, true
}

// canonAddress spells a 20-byte address in lowercase; anything else as sent.
func refCanonAddress(v any) any {
	if s, ok := v.(string); ok && isHexLen(s, 40) {
		return "0x" + strings.ToLower(s[2:])
	}
	return v
}

// maxQuantityBits is the widest quantity geth reads (hexutil.Big).
const refMaxQuantityBits = 256

// canonQuantity spells a hex quantity in lowercase; anything else (leading
// zeros too) as sent.
func refCanonQuantity(v any) any {
	s, ok := v.(string)
	if !ok || len(s) == 2 || !isHexLen(s, -1) || len(s) > 3 && s[2] == '0' {
		return v
	}
	n, ok := new(big.Int).SetString(s[2:], 16)
	if !ok || n.BitLen() > refMaxQuantityBits {
		return v
	}
	return "0x" + n.Text(16)
}

// hexBytes spells hex bytes in lowercase; anything else as sent.
func refHexBytes(v any) any {
	if s, ok := v.(string); ok && len(s)%2 == 0 && isHexLen(s, -1) {
		return "0x" + strings.ToLower(s[2:])
	}
	return v
}

// slot spells a storage slot as eth_getStorageAt reads it (geth's
// decodeStorageKey: an optional 0x, odd lengths padded, at most 32 bytes)
// as 32 bytes in lowercase; anything else as sent.
func refSlot(v any) any {
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
func refWriteJSON(b []byte, v any) ([]byte, bool) {
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
	case refRaw:
		return append(b, v...), true
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = refWriteJSON(b, x); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if !refFoldUnique(v) {
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
			if b, ok = refWriteJSON(b, v[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// foldUnique reports whether no two names of obj are equal but for case
// (strings.EqualFold, which geth's decoder matches field names by).
func refFoldUnique(obj map[string]any) bool {
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

// FuzzCanonicalReference: the scanner reads every JSON params as the
// reference reads them, refusals included; params that are not JSON (the
// transport lets none through) it refuses.
func FuzzCanonicalReference(f *testing.F) {
	for _, s := range []string{
		`["` + canonAddr + `","0x10"]`, `[{"to":"` + canonAddr + `","data":"0xABCD","gas":"0x0100","gas":"0x2"},"0x5"]`,
		`[{"to":"\u0030x00000000000000000000000000000000000000ab","From":"0x1","from":"0x2"},"latest",{"a":{"b":[1,2.0,-3e5]}}]`,
		`["` + canonAddr + `",{"blockHash":"` + canonBlock + `","requireCanonical":null}]`,
		`["` + canonAddr + `",{"BLOCKNUMBER":"0x01","blockNumber":"0x2"}]`, `["` + canonAddr + `",{"bloc\u212aHash":"` + canonBlock + `"}]`,
		`["` + canonAddr + `","1","0x5"]`, `["` + canonAddr + `",["0x1","0X02"],"earliest"]`, `null`, `[]`, `{"a":1}`, `[1]]`,
		`[{"value":"0x` + strings.Repeat("0", 70) + `1","nonce":"0x"},"\u00e9\u2028\ud800x"]`, "[\"\xff\xfe\",\"0x5\"]",
		`[{"to":"0x1"},"0x5",` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		for _, m := range []string{"eth_call", "eth_getStorageAt", "eth_getBalance", "eth_getProof", "trace_call", "eth_getBlockReceipts"} {
			c := ParseCall(m, json.RawMessage(params))
			got, ok := c.Canonical()
			if !json.Valid([]byte(params)) {
				if ok {
					t.Fatalf("%s %q: canonical %s, want none: not JSON", m, params, got.Params)
				}
				continue
			}
			want, wantOK := refCanonical(&c)
			if !ok && wantOK && nesting(params) > maxCanonDepth {
				continue // too deep to be worth its cost
			}
			if ok != wantOK || string(got.Params) != string(want.Params) || got.Block != want.Block ||
				got.RequireCanonical != want.RequireCanonical {
				t.Fatalf("%s %q:\n got %v %s %+v %v\nwant %v %s %+v %v", m, params,
					ok, got.Params, got.Block, got.RequireCanonical, wantOK, want.Params, want.Block, want.RequireCanonical)
			}
		}
	})
}

// nesting is the deepest nesting of arrays and objects in valid JSON s.
func nesting(s string) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

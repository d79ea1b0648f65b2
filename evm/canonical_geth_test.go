package evm

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// gethShape is one place in a call's params where geth decodes a value
// with one of its own types: the call built around the value, and geth's
// reading of it.
type gethShape struct {
	name   string
	method string
	params func(v string) string
	decode func(v []byte) (any, error)
}

func decodeAs[T any](v []byte) (any, error) {
	x := new(T)
	err := json.Unmarshal(v, x)
	return x, err
}

var gethShapes = []gethShape{
	{"address", "eth_getBalance", func(v string) string { return `[` + v + `,"0x5"]` }, decodeAs[common.Address]},
	{"gas", "eth_call", func(v string) string { return `[{"to":"` + canonAddr + `","gas":` + v + `},"0x5"]` }, decodeAs[hexutil.Uint64]},
	{"value", "eth_call", func(v string) string { return `[{"to":"` + canonAddr + `","value":` + v + `},"0x5"]` }, decodeAs[hexutil.Big]},
	{"data", "eth_call", func(v string) string { return `[{"to":"` + canonAddr + `","data":` + v + `},"0x5"]` }, decodeAs[hexutil.Bytes]},
	{"from", "eth_call", func(v string) string { return `[{"to":"` + canonAddr + `","from":` + v + `},"0x5"]` }, decodeAs[common.Address]},
	{"block", "eth_getBalance", func(v string) string { return `["` + canonAddr + `",` + v + `]` }, decodeAs[rpc.BlockNumberOrHash]},
	{"blockNumber", "eth_getBalance", func(v string) string { return `["` + canonAddr + `",{"blockNumber":` + v + `}]` },
		func(v []byte) (any, error) {
			return decodeAs[rpc.BlockNumberOrHash]([]byte(`{"blockNumber":` + string(v) + `}`))
		}},
	{"blockHash", "eth_getCode", func(v string) string { return `["` + canonAddr + `",{"blockHash":` + v + `}]` },
		func(v []byte) (any, error) {
			return decodeAs[rpc.BlockNumberOrHash]([]byte(`{"blockHash":` + string(v) + `}`))
		}},
	{"override", "eth_call", func(v string) string {
		return `[{"to":"` + canonAddr + `"},"0x5",{"` + canonAddr + `":{"balance":` + v + `}}]`
	}, decodeAs[hexutil.Big]},
	{"accessList", "eth_call", func(v string) string {
		return `[{"to":"` + canonAddr + `","accessList":[{"address":` + v + `,"storageKeys":[]}]},"0x5"]`
	}, decodeAs[common.Address]},
}

// naiveTwin is v as a lenient canonicalizer would spell it: unescaped,
// lowercase, without leading zeros. geth refuses many of these twins'
// originals; a key shared with the twin would serve its answer to them.
func naiveTwin(v string) string {
	var s string
	if json.Unmarshal([]byte(v), &s) != nil {
		return v
	}
	s = strings.ToLower(s)
	if strings.HasPrefix(s, "0x") && len(s) > 3 && len(s) != AddressLen && len(s) != HashLen {
		d := strings.TrimLeft(s[2:], "0")
		if d == "" {
			d = "0"
		}
		s = "0x" + d
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzCanonicalGeth: two values that share a canonical form are read by
// go-ethereum's own decoders (hexutil, common.Address, rpc.BlockNumberOrHash,
// as UnmarshalJSON) identically: both refused, or both read as the same
// value. Each value is held against its naive twin too (naiveTwin).
func FuzzCanonicalGeth(f *testing.F) {
	for _, s := range []struct {
		shape uint8
		a, b  string
	}{
		{0, `"` + canonAddr + `"`, `"\u0030x00000000000000000000000000000000000000ab"`},
		{1, `"0x100"`, `"0x0100"`}, {2, `"0x0"`, `"0x00"`}, {3, `"0xAB"`, `"\u0030xab"`},
		{5, `"0x324"`, `"0x0324"`}, {5, `"latest"`, `"\u006catest"`}, {6, `"0x1"`, `"0x01"`},
		{7, `"` + canonBlock + `"`, `"\u0030x` + canonBlock[2:] + `"`}, {8, `"0x1"`, `"0X1"`},
		{9, `"` + canonAddr + `"`, `"\u0030X00000000000000000000000000000000000000ab"`},
		{5, `"0x7fffffffffffffff"`, `"0x8000000000000000"`}, {1, `""`, `"0x0"`},
	} {
		f.Add(s.shape, s.a, s.b)
	}
	f.Fuzz(func(t *testing.T, shape uint8, a, b string) {
		sh := gethShapes[int(shape)%len(gethShapes)]
		for _, pair := range [][2]string{{a, b}, {a, naiveTwin(a)}, {b, naiveTwin(b)}} {
			x, y := pair[0], pair[1]
			if !json.Valid([]byte(x)) || !json.Valid([]byte(y)) || x == y {
				continue
			}
			cx, okX := canonical(t, sh.method, sh.params(x))
			cy, okY := canonical(t, sh.method, sh.params(y))
			if !okX || !okY || !bytes.Equal(cx.Params, cy.Params) || cx.Block != cy.Block || cx.RequireCanonical != cy.RequireCanonical {
				continue
			}
			gx, errX := sh.decode([]byte(x))
			gy, errY := sh.decode([]byte(y))
			if (errX == nil) != (errY == nil) || errX == nil && !reflect.DeepEqual(gx, gy) {
				t.Fatalf("%s: %s and %s share the key %s %+v, but geth reads %v (%v) and %v (%v)",
					sh.name, x, y, cx.Params, cx.Block, gx, errX, gy, errY)
			}
		}
	})
}

package evm

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	canonAddr  = "0x00000000000000000000000000000000000000aB"
	canonBlock = "0xAB00000000000000000000000000000000000000000000000000000000000001"
)

func canonical(t *testing.T, method, params string) (Canonical, bool) {
	t.Helper()
	c := ParseCall(method, []byte(params))
	return c.Canonical()
}

// TestCanonicalSpellings: each pair means the same to geth and shares a
// canonical form.
func TestCanonicalSpellings(t *testing.T) {
	tests := []struct {
		method string
		a, b   string
	}{
		{"eth_getBalance", `["` + canonAddr + `","0x10"]`, ` [ "0X00000000000000000000000000000000000000AB" , "0X10" ] `},
		{"eth_getBalance", `["` + canonAddr + `","0x10"]`, `["` + canonAddr + `",{"blockNumber":"0x10"}]`},
		{"eth_getCode", `["` + canonAddr + `",{"blockHash":"` + canonBlock + `"}]`, `["` + canonAddr + `","0xab00000000000000000000000000000000000000000000000000000000000001"]`},
		{"eth_getStorageAt", `["` + canonAddr + `","0x1","0x5"]`, `["` + canonAddr + `","0x0000000000000000000000000000000000000000000000000000000000000001","0x5"]`},
		{"eth_getStorageAt", `["` + canonAddr + `","1","0x5"]`, `["` + canonAddr + `","0x01","0x5"]`},
		{"eth_call", `[{"to":"` + canonAddr + `","data":"0xABCD","gas":"0x100"},"0x5"]`,
			`[{"gas":"0X100","data":"0xabcd","to":"0x00000000000000000000000000000000000000ab"},"0x5"]`},
		{"eth_call", `[{"to":"` + canonAddr + `","value":"0x0"},"0x5"]`, `[{"value":"0X0","to":"` + canonAddr + `"},"0x5"]`},
		{"eth_call", `[{"\u0074o":"` + canonAddr + `"},"0x5"]`, `[{"to":"` + canonAddr + `"},"0x5"]`},
		{"eth_call", `[{"to":"` + canonAddr + `","gas":"0x1","gas":"0x2"},"0x5"]`, `[{"gas":"0x2","to":"` + canonAddr + `"},"0x5"]`},
		{"eth_getCode", `["` + canonAddr + `",{"blockHash":"` + canonBlock + `","requireCanonical":null}]`, `["` + canonAddr + `","` + canonBlock + `"]`},
		{"eth_getBalance", `["` + canonAddr + `",{"blockNumber":"0x1","blockNumber":"0x10"}]`, `["` + canonAddr + `","0x10"]`},
	}
	for _, tt := range tests {
		a, okA := canonical(t, tt.method, tt.a)
		b, okB := canonical(t, tt.method, tt.b)
		if !okA || !okB {
			t.Errorf("%s %s / %s: ok %v %v", tt.method, tt.a, tt.b, okA, okB)
			continue
		}
		if string(a.Params) != string(b.Params) || a.Block != b.Block {
			t.Errorf("%s: %s and %s differ: %s %+v / %s %+v", tt.method, tt.a, tt.b, a.Params, a.Block, b.Params, b.Block)
		}
	}
}

// TestCanonicalMeanings: each pair differs in meaning and never shares a
// canonical form.
func TestCanonicalMeanings(t *testing.T) {
	call := func(tx string) string { return `[` + tx + `,"0x5"]` }
	tests := []struct {
		method string
		a, b   string
	}{
		{"eth_call", call(`{"to":"` + canonAddr + `","data":"0x01"}`), call(`{"to":"` + canonAddr + `","data":"0x0001"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `"}`), call(`{"to":"` + canonAddr + `","from":"` + canonAddr + `"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `","gas":"0x1"}`), call(`{"to":"` + canonAddr + `","gas":"0x2"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `"}`), `[{"to":"` + canonAddr + `"},"0x5",{"` + canonAddr + `":{"balance":"0x1"}}]`},
		{"eth_call", call(`{"to":"` + canonAddr + `","value":"1"}`), call(`{"to":"` + canonAddr + `","value":"0x1"}`)},
		{"eth_getStorageAt", `["` + canonAddr + `","0x1","0x5"]`, `["` + canonAddr + `","0x2","0x5"]`},
		{"eth_getProof", `["` + canonAddr + `",["0x1"],"0x5"]`, `["` + canonAddr + `",["0x01"],"0x5"]`},
		{"eth_getBalance", `["` + canonAddr + `","0x5"]`, `["` + canonAddr + `","0x6"]`},
		{"eth_getBalance", `["` + canonAddr + `","0x5"]`, `["` + canonAddr + `","0x5",null]`},
		{"eth_getCode", `["` + canonAddr + `",{"blockHash":"` + canonBlock + `"}]`,
			`["` + canonAddr + `",{"blockHash":"` + canonBlock + `","requireCanonical":true}]`},
		// geth refuses the second of each (-32602): leading zeros and
		// escaped hex are not spellings of the first.
		{"eth_call", call(`{"to":"` + canonAddr + `","gas":"0x100"}`), call(`{"to":"` + canonAddr + `","gas":"0x0100"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `","value":"0x0"}`), call(`{"to":"` + canonAddr + `","value":"0x00"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `"}`), call(`{"to":"\u0030x00000000000000000000000000000000000000ab"}`)},
		{"eth_call", call(`{"to":"` + canonAddr + `","data":"0x01"}`), call(`{"to":"` + canonAddr + `","data":"\u0030x01"}`)},
		{"eth_call", `[{"to":"` + canonAddr + `"},"0x5",{"` + canonAddr + `":{"balance":"0x1"}}]`,
			`[{"to":"` + canonAddr + `"},"0x5",{"` + canonAddr + `":{"balance":"\u0030x1"}}]`},
		{"eth_getBalance", `["` + canonAddr + `","0x5"]`, `["` + canonAddr + `","0x05"]`},
		{"eth_getBalance", `["` + canonAddr + `","0x324"]`, `["` + canonAddr + `",{"blockNumber":"0x0324"}]`},
		{"eth_getBalance", `["` + canonAddr + `","0x5"]`, `["\u0030x00000000000000000000000000000000000000ab","0x5"]`},
		{"eth_getCode", `["` + canonAddr + `","` + canonBlock + `"]`, `["` + canonAddr + `",{"blockHash":"\u0030x` + canonBlock[2:] + `"}]`},
	}
	for _, tt := range tests {
		a, okA := canonical(t, tt.method, tt.a)
		b, okB := canonical(t, tt.method, tt.b)
		if okA && okB && string(a.Params) == string(b.Params) && a.Block == b.Block && a.RequireCanonical == b.RequireCanonical {
			t.Errorf("%s: %s and %s share %s %+v", tt.method, tt.a, tt.b, a.Params, a.Block)
		}
	}
}

// TestCanonicalRefuses: params geth would read in an order the canonical
// form drops, or that do not read, have no canonical form.
func TestCanonicalRefuses(t *testing.T) {
	tests := []struct{ method, params string }{
		{"eth_call", `[{"to":"` + canonAddr + `","TO":"0x0000000000000000000000000000000000000001"},"0x5"]`},
		{"eth_getBalance", `["` + canonAddr + `",{"blockNumber":"0x1","blockHash":"` + canonBlock + `"}]`},
		{"eth_getBalance", `["` + canonAddr + `",{"blockNumber":"0x1","extra":1}]`},
		{"eth_getBalance", `["` + canonAddr + `","0xzz"]`},
		{"eth_getBalance", `{"address":"` + canonAddr + `"}`},
		{"eth_gasPrice", `[]`},
		{"eth_getBalance", `["` + canonAddr + `","0x5"] x`},
		{"eth_getBalance", `["` + canonAddr + `",{"blockNumber":"0x1","BlockNumber":"0x1"}]`},
		{"eth_call", `[{"to":"` + canonAddr + `"},"0x5",` + strings.Repeat("[", maxCanonDepth) + strings.Repeat("]", maxCanonDepth) + `]`},
	}
	for _, tt := range tests {
		if c, ok := canonical(t, tt.method, tt.params); ok {
			t.Errorf("%s %s: canonical %s %+v, want none", tt.method, tt.params, c.Params, c.Block)
		}
	}
}

func TestFoldKey(t *testing.T) {
	for _, tt := range []struct{ a, b string }{{"from", "FROM"}, {"k", "\u212a"}, {"s", "\u017f"}, {"blockHash", "BLOCKHASH"}} {
		if foldKey(tt.a) != foldKey(tt.b) {
			t.Errorf("%q and %q fold apart", tt.a, tt.b)
		}
	}
	if foldKey("from") != "from" {
		t.Errorf("foldKey(from) = %q", foldKey("from"))
	}
	if foldKey("a") == foldKey("b") {
		t.Error("a and b fold together")
	}
}

// TestCanonicalAllocations: a hit's key costs the canonical params' buffer
// and nothing per member.
func TestCanonicalAllocations(t *testing.T) {
	c := ParseCall("eth_call", json.RawMessage(`[{"to":"`+canonAddr+`","data":"0x70a08231","gas":"0x0100"},"0x5"]`))
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Canonical() }); n > 1 {
		t.Errorf("%v allocations, want 1", n)
	}
}

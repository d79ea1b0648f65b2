package evm

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

const testHash = "0xAB00000000000000000000000000000000000000000000000000000000000001"

func TestParseCall(t *testing.T) {
	tests := []struct {
		give      string // method params
		wantKind  Kind
		wantClass Class
		wantAt    int
		wantBlock BlockRef
		wantExact bool
		wantRef   BlockRef
		wantFull  bool
		wantIndex uint64
	}{
		{give: `eth_getBlockByNumber ["latest",true]`, wantKind: KindBlock, wantBlock: BlockRef{Kind: RefLatest},
			wantExact: true, wantRef: BlockRef{Kind: RefLatest}, wantFull: true},
		// Leading zeros: routing reads them, geth does not.
		{give: `eth_getBlockByNumber ["0x01",false]`, wantKind: KindBlock, wantBlock: BlockRef{Kind: RefNumber, Number: 1}},
		{give: `eth_getBlockByNumber ["0x1"]`, wantKind: KindBlock, wantBlock: BlockRef{Kind: RefNumber, Number: 1}},
		{give: `eth_getBlockByHash ["` + testHash + `",false]`, wantKind: KindBlock, wantAt: -1,
			wantExact: true, wantRef: BlockRef{Kind: RefHash}},
		{give: `eth_getTransactionByBlockNumberAndIndex ["0x10","0x2"]`, wantKind: KindTxByIndex,
			wantBlock: BlockRef{Kind: RefNumber, Number: 16}, wantExact: true, wantRef: BlockRef{Kind: RefNumber, Number: 16}, wantIndex: 2},
		{give: `eth_getBalance ["0x0000000000000000000000000000000000000001","safe"]`, wantAt: 1, wantBlock: BlockRef{Kind: RefSafe}},
		{give: `eth_getBalance ["0x0000000000000000000000000000000000000001"]`, wantAt: 1, wantBlock: BlockRef{Kind: RefNone}},
		{give: `eth_getUncleByBlockNumberAndIndex ["0x1","0x0"]`, wantKind: KindUncleByIndex, wantBlock: BlockRef{Kind: RefNumber, Number: 1}, wantExact: true},
		{give: `eth_blockNumber []`, wantKind: KindBlockNumber, wantAt: -1, wantExact: true},
		{give: `eth_sendRawTransaction ["0x00"]`, wantClass: ClassBroadcast, wantAt: -1},
		// Its filter is read as eth_getLogs', once, for the router's limits.
		{give: `eth_newFilter [{}]`, wantClass: ClassStateful, wantAt: -1, wantExact: true},
		{give: `eth_sendTransaction [{}]`, wantClass: ClassWrite, wantAt: -1},
		{give: `eth_getBlockReceipts [{"blockHash":"` + testHash + `"}]`, wantKind: KindBlockReceipts,
			wantBlock: BlockRef{Kind: RefHash}, wantExact: true, wantRef: BlockRef{Kind: RefHash}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			method, params, _ := cut(tt.give)
			c := ParseCall(method, json.RawMessage(params))
			if c.Kind != tt.wantKind || c.Class != tt.wantClass || c.BlockAt != tt.wantAt {
				t.Fatalf("kind %d class %d at %d, want %d %d %d", c.Kind, c.Class, c.BlockAt, tt.wantKind, tt.wantClass, tt.wantAt)
			}
			if c.BlockAt >= 0 && (!c.BlockOK || c.Block != tt.wantBlock) {
				t.Fatalf("block %+v (ok %v), want %+v", c.Block, c.BlockOK, tt.wantBlock)
			}
			if c.Exact != tt.wantExact || c.Ref != tt.wantRef || c.Full != tt.wantFull || c.Index != tt.wantIndex {
				t.Fatalf("exact %v ref %+v full %v index %d, want %v %+v %v %d",
					c.Exact, c.Ref, c.Full, c.Index, tt.wantExact, tt.wantRef, tt.wantFull, tt.wantIndex)
			}
			if c.Ref.Kind == RefHash && string(c.Key[:]) != "0xab00000000000000000000000000000000000000000000000000000000000001" {
				t.Fatalf("key %s", c.Key[:])
			}
		})
	}
}

func cut(s string) (method, params string, ok bool) {
	for i := range s {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// An exactly read filter gives the routing reading of its span that
// ParseLogRange gives, absent bounds (RefNone there) read as latest.
func TestCallRange(t *testing.T) {
	for _, give := range []string{
		`[{"fromBlock":"0x10","toBlock":"latest"}]`,
		`[{"fromBlock":"safe"}]`,
		`[{}]`,
		`[{"blockHash":"` + testHash + `"}]`,
		`[{"toBlock":"0x5","address":"0x0000000000000000000000000000000000000001"}]`,
	} {
		c := ParseCall("eth_getLogs", json.RawMessage(give))
		if !c.Exact || !c.RangeOK {
			t.Fatalf("%s: exact %v rangeOK %v", give, c.Exact, c.RangeOK)
		}
		want, err := ParseLogRange(json.RawMessage(give))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*BlockRef{&want.From, &want.To} {
			if r.Kind == RefNone && !want.ByHash {
				r.Kind = RefLatest
			}
		}
		if c.Range != want {
			t.Errorf("%s: range %+v, want %+v", give, c.Range, want)
		}
	}
	c := ParseCall("eth_getLogs", json.RawMessage(`[{"FromBlock":"0x1","toBlock":"0x2"}]`))
	if c.Exact || !c.RangeOK || c.Range.From.Number != 1 {
		t.Fatalf("a folded key: exact %v range %+v", c.Exact, c.Range)
	}
}

// The head-served calls parse without allocating.
func TestParseCallAllocs(t *testing.T) {
	for _, give := range []string{
		`eth_getBlockByNumber ["latest",false]`,
		`eth_getBlockByNumber ["0x1b4",true]`,
		`eth_getTransactionReceipt ["` + testHash + `"]`,
		`eth_getLogs [{"fromBlock":"latest","address":"0x0000000000000000000000000000000000000001"}]`,
		`eth_getBalance ["0x0000000000000000000000000000000000000001","latest"]`,
	} {
		method, params, _ := cut(give)
		p := json.RawMessage(params)
		if n := testing.AllocsPerRun(100, func() { _ = ParseCall(method, p) }); n != 0 {
			t.Errorf("%s: %v allocations", give, n)
		}
	}
}

func TestWithBlock(t *testing.T) {
	c := ParseCall("eth_getBalance", json.RawMessage(`["0x0000000000000000000000000000000000000001", "latest"]`))
	p, ok := c.WithBlock(0x20)
	if !ok || string(p.Params) != `["0x0000000000000000000000000000000000000001", "0x20"]` ||
		p.Block != (BlockRef{Kind: RefNumber, Number: 0x20}) || string(p.BlockRaw) != `"0x20"` {
		t.Fatalf("pinned %s %+v %s", p.Params, p.Block, p.BlockRaw)
	}
	b := ParseCall("eth_getBlockByNumber", json.RawMessage(`["lat\u0065st",false]`))
	if b.Exact || b.Block.Kind != RefLatest {
		t.Fatalf("escaped tag: exact %v block %+v", b.Exact, b.Block)
	}
	if p, ok = b.WithBlock(7); !ok || !p.Exact || p.Ref != (BlockRef{Kind: RefNumber, Number: 7}) {
		t.Fatalf("pinned block call: %+v", p)
	}
	if cid := ParseCall("eth_chainId", nil); func() bool { _, ok := cid.WithBlock(1); return ok }() {
		t.Fatal("a call without a block param was pinned")
	}
}

func TestBlockCall(t *testing.T) {
	c := ParseCall("eth_getHeaderByHash", json.RawMessage(`["`+testHash+`"]`))
	b, ok := c.BlockCall()
	if !ok || b.Method != "eth_getBlockByHash" || !b.Exact || b.Full || string(b.Params) != `["`+testHash+`",false]` {
		t.Fatalf("block call %+v %v", b, ok)
	}
	two := ParseCall("eth_getHeaderByNumber", json.RawMessage(`["0x1","0x2"]`))
	if _, ok := two.BlockCall(); ok {
		t.Fatal("two params read exact")
	}
}

// ParseBlockRef's copy-free path for plain strings reads them as Unquote
// and parseBlockString do.
func FuzzParseBlockRefString(f *testing.F) {
	for _, s := range []string{"latest", "0x1b4", "0x01", "0X1", "0x", testHash, "0x10000000000000000", "\xff0x1", "lat\\u0065st"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw := json.RawMessage(`"` + s + `"`)
		if !json.Valid(raw) {
			return
		}
		got, gotErr := ParseBlockRef(raw)
		var want BlockRef
		u, wantErr := strconv.Unquote(string(raw))
		if wantErr == nil {
			want, wantErr = parseBlockString(u)
		}
		if (gotErr != nil) != (wantErr != nil) || got != want {
			t.Fatalf("%q: %+v %v, want %+v %v", raw, got, gotErr, want, wantErr)
		}
	})
}

// BenchmarkParseCall reads a call of each path through ParseCall: an exact
// reading, a block param at index 1, a listed method without params to
// read, and a method the registry does not list.
func BenchmarkParseCall(b *testing.B) {
	for _, bc := range []struct{ method, params string }{
		{"eth_getBlockByNumber", `["latest",false]`},
		{"eth_call", `[{"to":"0x0000000000000000000000000000000000000001","data":"0x"},"latest"]`},
		{"eth_chainId", `[]`},
		{"eth_sendUserOperation", `[{}]`},
	} {
		p := json.RawMessage(bc.params)
		b.Run(bc.method, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_ = ParseCall(bc.method, p)
			}
		})
	}
}

// A row's name does not contradict its class: a listed read is not
// named as a write, and what the registry holds of a method is what
// ParseCall gives the call.
func TestRegistryRows(t *testing.T) {
	for name, m := range registry {
		if ns, rest, _ := strings.Cut(name, "_"); m.Class == ClassRead && writeName(ns, rest) {
			t.Errorf("%s: a read named as a write", name)
		}
		if m.Label != name || m.Block >= 0 && m.ByHash && m.Kind != KindOther {
			t.Errorf("%s: label %q, block %d by hash", name, m.Label, m.Block)
		}
		c := ParseCall(name, nil)
		if c.Row != m || c.Kind != m.Kind || c.Class != m.Class || c.BlockAt != m.Block {
			t.Errorf("%s: parsed as %+v", name, c)
		}
	}
}

// ParseCall's routing reading of a block param is ParseBlockRef's, however
// it got there (a hash may be left empty, and BlockParam has it).
func FuzzParseCallBlock(f *testing.F) {
	for _, s := range []string{`["latest",false]`, `["0x01",true]`, `["0x1b4"]`, `[{"blockNumber":"0x5"}]`,
		`[{"blockHash":"` + testHash + `","requireCanonical":true}]`, `["` + testHash + `"]`, `["lat\u0065st",false]`,
		`["0x2","0x0"]`, `[null]`, `[]`, `["pending",false]`, `["0x7fffffffffffffff",false]`, `["0x8000000000000000",false]`} {
		for _, m := range []string{"eth_getBlockByNumber", "eth_getBlockReceipts", "eth_getTransactionByBlockNumberAndIndex",
			"eth_getBlockTransactionCountByNumber", "eth_getUncleByBlockNumberAndIndex", "eth_getBalance"} {
			f.Add(m, s)
		}
	}
	f.Fuzz(func(t *testing.T, method, params string) {
		if !json.Valid([]byte(params)) {
			return
		}
		c := ParseCall(method, json.RawMessage(params))
		i, ok := BlockParamIndex(method)
		if !ok {
			if c.BlockAt != -1 {
				t.Fatalf("BlockAt %d for a method without a block param", c.BlockAt)
			}
			return
		}
		raw := Param(json.RawMessage(params), i)
		want, err := ParseBlockRef(raw)
		if c.BlockOK != (err == nil) || string(c.BlockRaw) != string(raw) {
			t.Fatalf("%s %s: ok %v raw %s, want %v %s", method, params, c.BlockOK, c.BlockRaw, err == nil, raw)
		}
		if err == nil && c.Block.Kind != want.Kind {
			t.Fatalf("%s %s: kind %d, want %d", method, params, c.Block.Kind, want.Kind)
		}
		got := c.Block
		if i == 0 {
			if got, ok = c.BlockParam(); ok != (err == nil) {
				t.Fatalf("BlockParam ok %v", ok)
			}
		}
		if err == nil && got != want {
			t.Fatalf("%s %s: block %+v, want %+v", method, params, got, want)
		}
	})
}

func TestWithBlockHash(t *testing.T) {
	c := ParseCall("eth_getStorageAt", json.RawMessage(`["0x0000000000000000000000000000000000000001","0x0", "0x20"]`))
	p, ok := c.WithBlockHash(testHash)
	if !ok || string(p.Params) != `["0x0000000000000000000000000000000000000001","0x0", {"blockHash":"`+testHash+`"}]` ||
		p.Block != (BlockRef{Kind: RefNumber, Number: 0x20}) || string(p.BlockRaw) != `{"blockHash":"`+testHash+`"}` {
		t.Fatalf("pinned %s %+v %s", p.Params, p.Block, p.BlockRaw)
	}
	if canon, ok := p.Canonical(); !ok || canon.Block.Kind != RefHash || canon.RequireCanonical {
		t.Fatalf("pinned call reads %+v %v, want its hash", canon, ok)
	}
	r := ParseCall("eth_getBlockReceipts", json.RawMessage(`["0x20"]`))
	if p, ok = r.WithBlockHash(testHash); !ok || !p.Exact || !p.ByHash() {
		t.Fatalf("pinned receipts call: %+v", p)
	}
	for _, bad := range []string{"", "0x1234", testHash[:len(testHash)-1] + "z"} {
		if _, ok := c.WithBlockHash(bad); ok {
			t.Errorf("pinned to %q", bad)
		}
	}
	if cid := ParseCall("eth_chainId", nil); func() bool { _, ok := cid.WithBlockHash(testHash); return ok }() {
		t.Fatal("a call without a block param was pinned")
	}
}

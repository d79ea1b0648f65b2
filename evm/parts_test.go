package evm

import (
	"strings"
	"testing"
)

// TestSplit: a block with its receipts splits into the node's own bytes,
// and receipts of another block, or of other transactions, are refused.
func TestSplit(t *testing.T) {
	h := func(c string) string { return "0x" + strings.Repeat(c, 64) }
	tx := func(c string) string { return `{"hash":"` + h(c) + `","nonce":"0x1"}` }
	block := `{"number":"0x10","hash":"` + h("a") + `","parentHash":"` + h("9") + `","timestamp":"0x5",` +
		`"transactions":[` + tx("1") + `,` + tx("2") + `],"uncles":[]}`
	log := `{"address":"0x00000000000000000000000000000000000000AB","topics":["` + strings.ToUpper(h("c")) + `"]}`
	receipt := func(txc, blockc, logs string) string {
		return `{"transactionHash":"` + h(txc) + `","blockHash":"` + h(blockc) + `","logs":[` + logs + `]}`
	}
	tests := []struct {
		name     string
		receipts string
		err      string // "" when it splits
	}{
		{name: "its receipts", receipts: `[` + receipt("1", "a", log) + `,` + receipt("2", "a", "") + `]`},
		{name: "another block's", receipts: `[` + receipt("1", "b", "") + `,` + receipt("2", "a", "") + `]`, err: "receipt 0 is for block"},
		{name: "out of order", receipts: `[` + receipt("2", "a", "") + `,` + receipt("1", "a", "") + `]`, err: "receipt 0 is for transaction"},
		{name: "one short", receipts: `[` + receipt("1", "a", "") + `]`, err: "1 receipts for 2 transactions"},
		{name: "not a list", receipts: `{}`, err: "receipts are not an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Split(&Block{Raw: []byte(block), Receipts: []byte(tt.receipts)})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := `{"number":"0x10","hash":"` + h("a") + `","parentHash":"` + h("9") + `","timestamp":"0x5",` +
				`"transactions":["` + h("1") + `","` + h("2") + `"],"uncles":[]}`
			switch {
			case p.Number != 16 || p.Hash != h("a") || p.Parent != h("9") || p.Time != 5:
				t.Errorf("block %d %s %s at %d", p.Number, p.Hash, p.Parent, p.Time)
			case string(p.HashOnly) != want:
				t.Errorf("hash-only form\n%s\nwant\n%s", p.HashOnly, want)
			case len(p.Txs) != 2 || string(p.Txs[1]) != tx("2") || p.TxHashes[0] != h("1"):
				t.Errorf("transactions %q %v", p.Txs, p.TxHashes)
			case len(p.Receipts) != 2 || len(p.Logs) != 1 || string(p.Logs[0].Raw) != log:
				t.Errorf("%d receipts, logs %+v", len(p.Receipts), p.Logs)
			case p.Logs[0].Address != "0x00000000000000000000000000000000000000ab" || p.Logs[0].Topics[0] != h("c"):
				t.Errorf("log address %s topics %v: want lowercase", p.Logs[0].Address, p.Logs[0].Topics)
			}
		})
	}
	if _, _, err := TxHashes([]byte(`{"number":"0x1","transactions":[]}`)); err == nil {
		t.Error("a block without hash and parentHash was read")
	}
}

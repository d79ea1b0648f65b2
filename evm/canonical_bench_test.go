package evm

import (
	"encoding/json"
	"testing"
)

// BenchmarkCanonical is the canonical form of an indexer's typical
// eth_call (a balanceOf), as every cache hit derives it.
func BenchmarkCanonical(b *testing.B) {
	c := ParseCall("eth_call", json.RawMessage(`[{"to":"`+canonAddr+`","data":"0x70a08231000000000000000000000000`+canonAddr[2:]+`"},"0x5"]`))
	b.ReportAllocs()
	for range b.N {
		if _, ok := c.Canonical(); !ok {
			b.Fatal("no canonical form")
		}
	}
}

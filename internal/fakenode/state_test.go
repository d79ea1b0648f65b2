package fakenode

import (
	"testing"
)

// State answers at a settled block are a pure function of the call and
// the block number, as a response cache needs of its upstream: the same
// after the chain moves on or forks above the block, the same from
// another node of the chain, the same by number and by hash, and
// different at another block where the state grows (balances, calls).
func TestStateAtABlockIsFixed(t *testing.T) {
	a := Start(t, Options{Head: 1000})
	b := Start(t, Options{Head: 1000})
	hc := httpClient(t)
	contract, account := Contracts()[0], "0x00000000000000000000000000000000000000aa"
	balanceOf := "0x70a08231000000000000000000000000" + account[2:]
	tests := []struct {
		name   string
		method string
		params func(block any) []any
		moves  bool // the answer differs at another block
		want   string
	}{
		{"call", "eth_call", func(blk any) []any { return []any{map[string]string{"to": contract, "input": balanceOf}, blk} }, true, ""},
		{"call of an account", "eth_call", func(blk any) []any { return []any{map[string]string{"to": account, "input": balanceOf}, blk} }, false, `"0x"`},
		{"balance", "eth_getBalance", func(blk any) []any { return []any{account, blk} }, true, ""},
		{"code", "eth_getCode", func(blk any) []any { return []any{contract, blk} }, false, contractCode},
		{"empty code", "eth_getCode", func(blk any) []any { return []any{account, blk} }, false, `"0x"`},
	}
	const settled = "0x1f4" // 500, far below the finalized block (936)
	hash := a.BlockHash(500)
	before := map[string]string{}
	for _, tt := range tests {
		got := string(mustRPC(t, hc, a.URL(), tt.method, tt.params(settled)...))
		if tt.want != "" && got != tt.want {
			t.Errorf("%s = %s, want %s", tt.name, got, tt.want)
		}
		before[tt.name] = got
	}

	a.Mine(50)
	a.SetFork(990, 7)
	for _, tt := range tests {
		for _, n := range []*Node{a, b} {
			if got := string(mustRPC(t, hc, n.URL(), tt.method, tt.params(settled)...)); got != before[tt.name] {
				t.Errorf("%s at 500 after the chain moved = %s, was %s", tt.name, got, before[tt.name])
			}
		}
		if got := string(mustRPC(t, hc, a.URL(), tt.method, tt.params(map[string]string{"blockHash": hash})...)); got != before[tt.name] {
			t.Errorf("%s by hash = %s, by number %s", tt.name, got, before[tt.name])
		}
		other := string(mustRPC(t, hc, a.URL(), tt.method, tt.params("0x1f5")...))
		if moved := other != before[tt.name]; moved != tt.moves {
			t.Errorf("%s at 501 = %s, at 500 %s: changed %v, want %v", tt.name, other, before[tt.name], moved, tt.moves)
		}
	}
}

package fakenode

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestGetLogsFilters checks each filter against the unfiltered logs of the
// same range, filtered here the way the JSON-RPC spec describes.
func TestGetLogsFilters(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	c, topic := Contracts(), Topic0s()
	sender1 := "0x000000000000000000000000" + strings.TrimPrefix(Senders()[1], "0x")

	var all []logEntry
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getLogs", map[string]any{"fromBlock": "0x1", "toBlock": "0x14"}), &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 20*txsPerBlock {
		t.Fatalf("unfiltered: %d logs, want one per transaction", len(all))
	}

	tests := []struct {
		name      string
		addresses []string
		topics    [][]string // nil entry: wildcard position
		wantNone  bool
	}{
		{name: "one address", addresses: []string{c[0]}},
		{name: "address list", addresses: []string{c[1], c[2]}},
		{name: "topic0", topics: [][]string{{topic[0]}}},
		{name: "topic0 alternatives", topics: [][]string{{topic[1], topic[2]}}},
		{name: "wildcard then sender", topics: [][]string{nil, {sender1}}},
		{name: "address and topics", addresses: []string{c[2]}, topics: [][]string{{topic[0], topic[1]}, {sender1}}},
		{name: "more positions than topics", topics: [][]string{nil, nil, nil}, wantNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filter := map[string]any{"fromBlock": "0x1", "toBlock": "0x14"}
			if tt.addresses != nil {
				filter["address"] = tt.addresses
			}
			if tt.topics != nil {
				ts := make([]any, len(tt.topics))
				for i, alts := range tt.topics {
					if alts != nil {
						ts[i] = alts
					}
				}
				filter["topics"] = ts
			}
			var got []logEntry
			if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getLogs", filter), &got); err != nil {
				t.Fatal(err)
			}
			var want []logEntry
			for _, l := range all {
				if matches(l, tt.addresses, tt.topics) {
					want = append(want, l)
				}
			}
			if tt.wantNone != (len(want) == 0) {
				t.Fatalf("reference found %d logs; the test case is wrong", len(want))
			}
			if !slices.EqualFunc(got, want, sameLog) {
				t.Errorf("got %d logs, want %d", len(got), len(want))
			}
		})
	}

	// Logs come by block, then log index.
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		ab, bb := hexNum(t, a.BlockNumber), hexNum(t, b.BlockNumber)
		if ab > bb || (ab == bb && hexNum(t, a.LogIndex) >= hexNum(t, b.LogIndex)) || b.Removed {
			t.Fatalf("log %d out of order: %+v after %+v", i, b, a)
		}
	}

	// By block hash: the logs of that block only.
	var byHash []logEntry
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getLogs", map[string]any{"blockHash": n.BlockHash(7)}), &byHash); err != nil {
		t.Fatal(err)
	}
	if len(byHash) != txsPerBlock || byHash[0].BlockHash != n.BlockHash(7) || hexNum(t, byHash[1].BlockNumber) != 7 {
		t.Errorf("by hash: %+v", byHash)
	}
}

func matches(l logEntry, addresses []string, topics [][]string) bool {
	if len(addresses) > 0 && !slices.Contains(addresses, l.Address) {
		return false
	}
	if len(topics) > len(l.Topics) {
		return false
	}
	for i, alts := range topics {
		if len(alts) > 0 && !slices.Contains(alts, l.Topics[i]) {
			return false
		}
	}
	return true
}

func sameLog(a, b logEntry) bool {
	return a.TxHash == b.TxHash && a.BlockHash == b.BlockHash && string(a.LogIndex) == string(b.LogIndex)
}

func TestGetLogsCap(t *testing.T) {
	n := Start(t, Options{Head: MaxLogResults})
	hc := httpClient(t)
	_, rerr := callRPC(t, hc, n.URL(), "eth_getLogs", map[string]any{"fromBlock": "earliest"})
	if rerr == nil || rerr.Code != -32005 {
		t.Errorf("runaway query: %v, want -32005", rerr)
	}
}

// TestManyContracts: with Options.Contracts each transaction's log comes
// from the next contract in turn, so one contract's logs are rare: those
// of the last of 1,000 in blocks 1..3000 are the six of transactions
// 999, 1999, ... 5999.
func TestManyContracts(t *testing.T) {
	n := Start(t, Options{Contracts: 1000, Head: 3000})
	hc := httpClient(t)
	c := n.Contracts()
	if len(c) != 1000 || !slices.Equal(c[:3], Contracts()) || len(slices.Compact(slices.Sorted(slices.Values(c)))) != 1000 {
		t.Fatalf("contracts: %d, the first %v; want 1000 distinct, the default three first", len(c), c[:3])
	}
	var logs []logEntry
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getLogs",
		map[string]any{"fromBlock": "0x1", "toBlock": "0xbb8", "address": c[999]}), &logs); err != nil {
		t.Fatal(err)
	}
	if len(logs) != 6 {
		t.Fatalf("%d logs of contract 999, want 6", len(logs))
	}
	for _, l := range logs {
		if l.Address != c[999] {
			t.Errorf("log of %s in the answer for %s", l.Address, c[999])
		}
	}
}

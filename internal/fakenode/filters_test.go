package fakenode

import (
	"encoding/json"
	"fmt"
	"testing"
)

// A pending-transaction filter collects the hashes of the transactions
// sent after it was made, hands them out once per poll, forgets them on
// DropFilters ("filter not found", as geth) and is gone once uninstalled.
func TestPendingTransactionFilter(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	sendN := func(i int) string {
		raw := fmt.Sprintf("0x02%064x", i)
		var h string
		if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_sendRawTransaction", raw), &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	changes := func(id string) []string {
		t.Helper()
		var hs []string
		if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getFilterChanges", id), &hs); err != nil {
			t.Fatal(err)
		}
		return hs
	}
	sendN(0) // before the filter: not in it
	var id string
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_newPendingTransactionFilter"), &id); err != nil || id == "" {
		t.Fatalf("filter id %q: %v", id, err)
	}
	if got := changes(id); len(got) != 0 {
		t.Errorf("first poll = %v, want []", got)
	}
	h1, h2 := sendN(1), sendN(2)
	if got := changes(id); len(got) != 2 || got[0] != h1 || got[1] != h2 {
		t.Errorf("poll = %v, want [%s %s]", got, h1, h2)
	}
	if got := changes(id); len(got) != 0 {
		t.Errorf("poll again = %v, want [] (each hash once)", got)
	}
	var full string
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_newPendingTransactionFilter", true), &full); err != nil || full == id {
		t.Fatalf("full filter id %q: %v", full, err)
	}
	h3 := sendN(3)
	if got := changes(full); len(got) != 1 || got[0] != h3 {
		t.Errorf("full filter poll = %v, want [%s]", got, h3)
	}
	if n.PendingFilters() != 2 {
		t.Errorf("PendingFilters = %d, want 2", n.PendingFilters())
	}

	n.DropFilters()
	if _, rerr := callRPC(t, hc, n.URL(), "eth_getFilterChanges", id); rerr == nil || rerr.Code != -32000 || rerr.Message != "filter not found" {
		t.Errorf("poll after DropFilters: %v, want -32000 filter not found", rerr)
	}
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_newPendingTransactionFilter"), &id); err != nil {
		t.Fatal(err)
	}
	if got := string(mustRPC(t, hc, n.URL(), "eth_uninstallFilter", id)); got != "true" {
		t.Errorf("uninstall = %s, want true", got)
	}
	if got := string(mustRPC(t, hc, n.URL(), "eth_uninstallFilter", id)); got != "false" {
		t.Errorf("uninstall again = %s, want false", got)
	}
	if n.PendingFilters() != 0 {
		t.Errorf("PendingFilters = %d after uninstall, want 0", n.PendingFilters())
	}
}

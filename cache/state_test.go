package cache

import (
	"context"
	"testing"
)

// TestState: the tiers on, what the memory tier holds, and the hit ratio
// of the calls with a fixed block (an uncached method counts in neither).
func TestState(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	up := &upstream{res: `"0x1"`}
	get := call("eth_getBalance", `["`+testAddr+`","0x5"]`)
	for range 3 {
		_, _, _ = c.Serve(context.Background(), get, v, false, up.fetch)
	}
	_, _, _ = c.Serve(context.Background(), call("eth_gasPrice", `[]`), v, false, up.fetch)
	c.memory.c.CleanUp() // otter counts a write at its next maintenance
	st := c.State(context.Background())
	if st.Hits != 2 || st.Misses != 1 || st.HitRatio < 0.66 || st.HitRatio > 0.67 {
		t.Errorf("hits %d misses %d ratio %v, want 2 1 2/3", st.Hits, st.Misses, st.HitRatio)
	}
	if len(st.Tiers) != 1 || st.Tiers[0].Name != "memory" || st.Tiers[0].Hits != 2 {
		t.Fatalf("tiers %+v, want memory with 2 hits", st.Tiers)
	}
	if e, b := st.Tiers[0].Entries, st.Tiers[0].Bytes; e == nil || *e != 1 || b == nil || *b <= 0 {
		t.Errorf("memory entries %v bytes %v, want 1 and some", e, b)
	}
}

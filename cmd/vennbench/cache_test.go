package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// A workload is a pure function of its spec, its answers are the fake
// chain's, and the indexers start spread over it.
func TestWorkload(t *testing.T) {
	spec := workloadSpec{From: 500, Blocks: 20, Events: 5, Holders: 50, Seed: 1}
	a, err := newWorkload(spec, 2000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newWorkload(spec, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.calls) != 20*5*3 || len(a.calls) != len(b.calls) {
		t.Fatalf("%d and %d calls, want %d", len(a.calls), len(b.calls), 20*5*3)
	}
	seen := map[string]bool{}
	for i := range a.calls {
		ca, cb := a.calls[i], b.calls[i]
		if !bytes.Equal(ca.tail, cb.tail) || !bytes.Equal(ca.want, cb.want) {
			t.Fatalf("call %d differs: %s → %s, %s → %s", i, ca.tail, ca.want, cb.tail, cb.want)
		}
		var req struct {
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(a.request(nil, i, 7), &req); err != nil || len(req.Params) != 2 {
			t.Fatalf("call %d: %s: %v", i, a.request(nil, i, 7), err)
		}
		if want := []string{"eth_call", "eth_getBalance", "eth_getCode"}[i%3]; req.Method != want {
			t.Errorf("call %d is %s, want %s", i, req.Method, want)
		}
		if req.Method == "eth_getCode" && string(ca.want) == `"0x"` {
			t.Errorf("call %d: code of a token contract is empty: %s", i, ca.tail)
		}
		seen[string(ca.tail)] = true
	}
	if a.distinct != len(seen) || a.distinct >= len(a.calls) || a.distinct < len(a.calls)/3 {
		t.Errorf("distinct %d of %d calls (counted %d): want some repeats, not mostly", a.distinct, len(a.calls), len(seen))
	}

	// The reply check accepts the call's own answer only.
	good := append(append([]byte(`{"jsonrpc":"2.0","id":7,"result":`), a.calls[0].want...), '}')
	if err := a.check(good, 0, 7); err != nil {
		t.Errorf("own answer refused: %v", err)
	}
	if err := a.check([]byte(`{"jsonrpc":"2.0","id":7,"result":"0x1"}`), 0, 7); err == nil {
		t.Error("a wrong answer passed")
	}

	// The next round's blocks are other calls.
	spec.From += uint64(spec.Blocks)
	c, err := newWorkload(spec, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.calls {
		if seen[string(c.calls[i].tail)] {
			t.Fatalf("round 2 repeats round 1's call %s", c.calls[i].tail)
		}
	}

	ixs := newIndexers(a, 4, []string{"A", "B"}, true)
	for i, ix := range ixs {
		if ix.offset != i*len(a.calls)/4 || ix.url != []string{"A", "B"}[i%2] || ix.limit != int64(len(a.calls)) {
			t.Errorf("indexer %d: offset %d url %s limit %d", i, ix.offset, ix.url, ix.limit)
		}
	}
}

// The fill is n distinct entries, none of them a round's.
func TestFillWorkload(t *testing.T) {
	w, err := newFillWorkload(100, 499, 50, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.calls) != 100 || w.distinct != 100 {
		t.Fatalf("%d calls, %d distinct", len(w.calls), w.distinct)
	}
	for _, c := range w.calls {
		if !strings.Contains(string(c.tail), `"0x1f3"`) || len(c.want) != 2+2+64 {
			t.Fatalf("fill call %s → %s", c.tail, c.want)
		}
	}
}

func TestParseCacheFlags(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantCode int
	}{
		{name: "defaults", wantCode: -1},
		{name: "small", give: []string{"-blocks", "2", "-events", "1", "-holders", "2", "-fill", "0", "-conc", "4"}, wantCode: -1},
		{name: "no indexers", give: []string{"-indexers", "0"}, wantCode: exitUsage},
		{name: "too many workers", give: []string{"-indexers", "64", "-per-indexer", "100"}, wantCode: exitUsage},
		{name: "one holder", give: []string{"-holders", "1"}, wantCode: exitUsage},
		{name: "block zero", give: []string{"-from", "0"}, wantCode: exitUsage},
		{name: "bad conc", give: []string{"-conc", "0"}, wantCode: exitUsage},
		{name: "extra arg", give: []string{"now"}, wantCode: exitUsage},
		{name: "help", give: []string{"-h"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, code := parseCacheFlags(tt.give, &stderr)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if code == -1 && cfg.upstreamHead() < cfg.roundSpec(cfg.Rounds).From+uint64(cfg.Spec.Blocks)+fakenode.DefaultFinalizedDepth {
				t.Errorf("head %d does not settle round %d's blocks", cfg.upstreamHead(), cfg.Rounds)
			}
		})
	}
}

func TestCacheMetrics(t *testing.T) {
	m := metrics{
		`venn_cache_requests_total{chain="bench",method="eth_call",outcome="hit",tier="memory"}`:    5,
		`venn_cache_requests_total{chain="bench",method="eth_getCode",outcome="hit",tier="memory"}`: 2,
		`venn_cache_requests_total{chain="bench",method="eth_call",outcome="miss",tier="memory"}`:   3,
		`venn_cache_requests_total{chain="bench",method="eth_call",outcome="hit",tier="redis"}`:     1,
		`venn_cache_requests_total{chain="other",method="eth_call",outcome="hit",tier="memory"}`:    100,
		`venn_cache_bytes{chain="bench",tier="memory"}`:                                             4096,
		`venn_cache_bytes{chain="bench",tier="redis"}`:                                              1,
		`venn_cache_bytes_total{chain="bench",tier="memory"}`:                                       9,
		`process_resident_memory_bytes`:                                                             1e6,
	}
	got := m.cacheRequests()
	if got[cacheKey{"memory", "hit"}] != 7 || got[cacheKey{"memory", "miss"}] != 3 || got[cacheKey{"redis", "hit"}] != 1 || len(got) != 3 {
		t.Errorf("cacheRequests = %v", got)
	}
	if v, ok := m.gauge("venn_cache_bytes", map[string]string{"tier": "memory"}); !ok || v != 4096 {
		t.Errorf("memory bytes = %v %v", v, ok)
	}
	if v, ok := m.gauge("process_resident_memory_bytes", nil); !ok || v != 1e6 {
		t.Errorf("rss = %v %v", v, ok)
	}
	if _, ok := m.gauge("venn_cache_entries", nil); ok {
		t.Error("an absent gauge was found")
	}
	before := clusterSnap{replicas: []metrics{{}}}
	after := clusterSnap{replicas: []metrics{m}}
	if h := cacheHits(before, after); h["memory"] != 7 || h["redis"] != 1 {
		t.Errorf("hits %v", h)
	}
}

// The cache mode runs the cluster, the proxy and the upstream, replays
// the workload on each and reports every phase; direct and the proxy ask
// upstream once per call, venn at most that, and nothing outlives it.
func TestCacheBench(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	bin := vennBinary(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"cache", "-venn", bin, "-duration", "300ms", "-warmup", "100ms", "-rounds", "1",
		"-conc", "1,4", "-blocks", "10", "-events", "4", "-holders", "20", "-fill", "200", "-block-time", "200ms",
	}, &stdout, &stderr)
	out := stdout.String()
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	for _, want := range []string{
		"Errors: none", "120 calls per indexer",
		"| throughput of venn's hits ÷ the proxy's pass-through at c=4 |",
		"| the cluster's upstream calls per client call, 4 indexers' replay |",
		"| process_resident_memory_bytes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Replay columns: target, client calls, upstream calls, per call, ...
	for _, target := range []string{"direct", "proxy"} {
		row := tableRow(t, out, "| "+target+" | 480 |")
		if v := cellFloat(t, row, 3); v != 1 {
			t.Errorf("%s: %.4f upstream calls per client call, want 1: %v", target, v, row)
		}
	}
	// Two replicas' memory tiers at least: each distinct call asked at
	// most once per replica.
	if v := cellFloat(t, tableRow(t, out, "| venn | 480 |"), 3); v > 0.5 {
		t.Errorf("venn: %.4f upstream calls per client call in the replay, want at most 2 × distinct ÷ calls", v)
	}
	// Hit columns: target, conc, req/s, p50, p99, CPU, upstream CPU, load
	// CPU, upstream calls per call, memory hits, errors.
	for _, conc := range []string{"1", "4"} {
		row := tableRow(t, out, "| venn | "+conc+" |")
		if cellFloat(t, row, 8) != 0 || cellFloat(t, row, 9) != 1 {
			t.Errorf("venn's hit phase at c=%s asked upstream or missed: %v", conc, row)
		}
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

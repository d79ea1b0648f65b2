package blockstore

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestStats reports each chain's partitions, coverage, rows and bytes, and
// a History serving a chain exports them as metrics labelled by its name.
func TestStats(t *testing.T) {
	p, u := open(t)
	one := p.ChainWith(1, "one", Policy{PartitionBlocks: 1000})
	mustPut(t, one, synthChain(t, "a", 990, 1009, 4)...)
	mustPut(t, p.Chain(2, "two"), synthChain(t, "b", 5, 6, 2)...)
	// Before any ANALYZE, Postgres's estimates are -1 or 0: the rows must
	// be there all the same.
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			pgtest.Exec(t, u, "ANALYZE")
		}
		checkStats(t, p, analyzed)
	}

	reg := prometheus.NewRegistry()
	h, err := OpenHistory(context.Background(), Config{URL: u}, Options{Logger: slog.New(slog.DiscardHandler), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h.Chain(1, "one", Policy{})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Stop(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for gauge(t, reg, "venn_blockstore_rows", "one", "logs") != 120 {
		if time.Now().After(deadline) {
			t.Fatalf("venn_blockstore_rows{chain=one,table=logs} = %v after 30s, want 120",
				gauge(t, reg, "venn_blockstore_rows", "one", "logs"))
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for state
	}
	if b := gauge(t, reg, "venn_blockstore_bytes", "one", "blocks"); b <= 0 {
		t.Errorf("venn_blockstore_bytes{chain=one,table=blocks} = %v", b)
	}
	if n := gauge(t, reg, "venn_blockstore_rows", "two", "blocks"); n != -1 {
		t.Errorf("a chain the History does not serve has metrics: %v", n)
	}
}

// gauge returns the value of the gauge name{chain, table}; -1 when absent.
func gauge(t *testing.T, reg *prometheus.Registry, name, chain, table string) float64 {
	t.Helper()
	if v, ok := testkit.Value(t, reg, name, map[string]string{"chain": chain, "table": table}); ok {
		return v
	}
	return -1
}

// checkStats checks what Stats reads of TestStats's chains.
func checkStats(t *testing.T, p *Postgres, analyzed bool) {
	t.Helper()
	stats, err := p.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 2 || stats[0].ChainID != 1 || stats[1].ChainID != 2 {
		t.Fatalf("stats of chains %+v, want 1 and 2", stats)
	}
	s := stats[0]
	if s.Partitions != 3 || !slices.Equal(s.Covered, []Range{{990, 1009}}) {
		t.Errorf("analyzed %v: chain 1: %d partitions, covered %v; want 3 and [990, 1009]", analyzed, s.Partitions, s.Covered)
	}
	// Four transactions a block with 0, 1, 2 and 3 logs.
	wantRows := map[string]int64{"blocks": 20, "transactions": 80, "logs": 120}
	for _, tb := range s.Tables {
		if tb.Rows != wantRows[tb.Table] || tb.Bytes <= 0 {
			t.Errorf("analyzed %v: chain 1 %s: %d rows, %d bytes; want %d rows", analyzed, tb.Table, tb.Rows, tb.Bytes, wantRows[tb.Table])
		}
	}
	if got := stats[1].Tables[0]; got.Rows != 2 {
		t.Errorf("analyzed %v: chain 2 blocks: %d rows, want 2", analyzed, got.Rows)
	}
}

package blockstore

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// open opens a store on a fresh migrated database.
func open(t testing.TB) (*Postgres, string) {
	t.Helper()
	u := pgtest.New(t)
	return openURL(t, u, nil), u
}

func openURL(t testing.TB, u string, reg prometheus.Registerer) *Postgres {
	t.Helper()
	p, err := Open(context.Background(), u, Options{Logger: slog.New(slog.DiscardHandler), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// mustPut parses raw blocks and stores them.
func mustPut(t testing.TB, c *Chain, blocks ...*evm.Block) {
	t.Helper()
	if err := c.Put(context.Background(), blocks); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

func parse(t testing.TB, raw, receipts json.RawMessage) *evm.Block {
	t.Helper()
	b, err := evm.ParseBlock(raw, receipts)
	if err != nil {
		t.Fatalf("ParseBlock: %v", err)
	}
	return b
}

func mustCovered(t testing.TB, c *Chain, from, to uint64) []Range {
	t.Helper()
	got, err := c.Covered(context.Background(), from, to)
	if err != nil {
		t.Fatalf("Covered: %v", err)
	}
	return got
}

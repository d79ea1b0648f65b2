package chain

import (
	"context"
	"testing"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// TestHistoryOff: a chain with history off gets no store (nothing
// archived, nothing read) while the others keep theirs.
func TestHistoryOff(t *testing.T) {
	store, err := blockstore.OpenHistory(context.Background(), blockstore.Config{URL: pgtest.Empty(t)}.WithDefaults(time.Second), blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Stop(context.Background()) })
	cc := Config{Name: "test", ChainID: 1}
	if historyOf(store, cc) == nil {
		t.Error("a chain with history on has no store")
	}
	if historyOf(nil, cc) != nil {
		t.Error("a chain without postgres.url has a store")
	}
	cc.History.Off = true
	if historyOf(store, cc) != nil {
		t.Error("a chain with history off has a store")
	}
}

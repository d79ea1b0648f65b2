package blockstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// TestHistoryMigratesAndGates: on a database without the schema the store
// says migrating, stores nothing and answers nothing; Start migrates it,
// and then it is up and serves. Its readiness decides the process's only
// when required.
func TestHistoryMigratesAndGates(t *testing.T) {
	u := pgtest.Empty(t)
	h, err := OpenHistory(context.Background(), Config{URL: u, Required: true}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := h.Chain(1, "test", Policy{})
	blocks := synthChain(t, "a", 10, 12, 2)

	if r := h.Readiness(); r != (Readiness{State: StateMigrating, Required: true}) || r.Ready() || !r.Degraded() {
		t.Errorf("readiness before Start = %+v (ready %v, degraded %v)", r, r.Ready(), r.Degraded())
	}
	if err := c.Put(ctx, blocks); !errors.Is(err, ErrNotMigrated) {
		t.Errorf("Put before the migrations = %v, want ErrNotMigrated", err)
	}
	if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", []byte(`["0xa",false]`))); ok || err != nil {
		t.Errorf("Answer before the migrations = %v, %v; want not ok, no error", ok, err)
	}
	if _, _, err := c.Highest(ctx); !errors.Is(err, ErrNotMigrated) {
		t.Errorf("Highest before the migrations = %v, want ErrNotMigrated", err)
	}

	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Stop(stopCtx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for h.Readiness().State != StateUp {
		if time.Now().After(deadline) {
			t.Fatalf("readiness after Start = %+v, want up", h.Readiness())
		}
		time.Sleep(10 * time.Millisecond) // a poll interval, not a wait for state
	}
	if r := h.Readiness(); !r.Ready() || r.Degraded() {
		t.Errorf("readiness once migrated = %+v (ready %v, degraded %v)", r, r.Ready(), r.Degraded())
	}
	if err := c.Put(ctx, blocks); err != nil {
		t.Fatalf("Put once migrated: %v", err)
	}
	if n, ok, err := c.Highest(ctx); err != nil || !ok || n != 12 {
		t.Errorf("Highest once migrated = %d, %v, %v; want 12", n, ok, err)
	}
	if got := (Readiness{State: StateDown}); !got.Ready() || !got.Degraded() {
		t.Errorf("a store down but not required: ready %v, degraded %v; want ready and degraded", got.Ready(), got.Degraded())
	}
}

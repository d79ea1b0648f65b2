package cache

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestPostgresRoundTrip: settled entries come back byte for byte; a key
// stored again keeps its first answer; an unknown key is a miss.
func TestPostgresRoundTrip(t *testing.T) {
	p := NewPostgres(pgPool(t, pgtest.New(t)), 1, patient(PostgresOptions{}))
	ctx := t.Context()
	for _, tt := range sampleEntries {
		e := tt.give
		e.Settled = true
		k := testKey(tt.name)
		if err := p.Set(ctx, k, e, 0); err != nil {
			t.Fatalf("%s: Set: %v", tt.name, err)
		}
		if err := p.Set(ctx, k, Entry{Value: []byte(`"other"`), Settled: true}, 0); err != nil {
			t.Fatalf("%s: Set again: %v", tt.name, err)
		}
		got, ok, err := p.Get(ctx, k)
		if err != nil || !ok || !sameEntry(got, e) {
			t.Errorf("%s: Get = %+v, %v, %v; want %+v", tt.name, got, ok, err, e)
		}
	}
	if _, ok, err := p.Get(ctx, testKey("nobody stored this")); ok || err != nil {
		t.Errorf("Get of an unknown key = %v, %v; want a miss", ok, err)
	}
	// Chains do not share entries.
	other := NewPostgres(p.db, 2, patient(PostgresOptions{}))
	if _, ok, err := other.Get(ctx, testKey(sampleEntries[0].name)); ok || err != nil {
		t.Errorf("another chain's Get = %v, %v; want a miss", ok, err)
	}
}

// TestPostgresRefuses: unsettled and oversized entries are refused with
// their errors and not stored; a tier that is not ready stores nothing
// and misses, without an error.
func TestPostgresRefuses(t *testing.T) {
	db := pgPool(t, pgtest.New(t))
	ready := false
	p := NewPostgres(db, 1, patient(PostgresOptions{MaxEntryBytes: 10, Ready: func() bool { return ready }}))
	ctx := t.Context()
	tests := []struct {
		name string
		give Entry
		want error
	}{
		{"unsettled", Entry{Value: []byte(`"0x1"`)}, ErrNotSettled},
		{"too large", Entry{Value: []byte(`"123456789"`), Settled: true}, ErrTooLarge},
		{"not ready", Entry{Value: []byte(`"0x1"`), Settled: true}, nil},
	}
	for _, tt := range tests {
		k := testKey(tt.name)
		if err := p.Set(ctx, k, tt.give, 0); !errors.Is(err, tt.want) {
			t.Errorf("%s: Set = %v; want %v", tt.name, err, tt.want)
		}
		ready = true
		if _, ok, err := p.Get(ctx, k); ok || err != nil {
			t.Errorf("%s: Get = %v, %v; want a miss", tt.name, ok, err)
		}
		ready = false
	}
}

// TestPostgresRetention: a prune deletes the rows past the age, then the
// oldest past the row limit, a batch at a time, and nothing of another
// chain; Size counts what is left.
func TestPostgresRetention(t *testing.T) {
	u := pgtest.New(t)
	db := pgPool(t, u)
	p := NewPostgres(db, 1, patient(PostgresOptions{MaxAge: time.Hour, MaxRows: 3, PruneBatch: 1}))
	other := NewPostgres(db, 2, patient(PostgresOptions{MaxAge: time.Hour, MaxRows: 3}))
	ctx := t.Context()
	value := []byte(`"0x1234"`)
	for i := range 6 {
		for _, tier := range []*Postgres{p, other} {
			if err := tier.Set(ctx, testKey(strconv.Itoa(i)), Entry{Value: value, Settled: true}, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Row i is i minutes old, and rows 4 and 5 of chain 1 past the age.
	pgtest.Exec(t, u, `UPDATE cache_entries SET created_at = now() - make_interval(mins => CASE
		WHEN chain_id = 1 AND key IN ($1, $2) THEN 120 ELSE 0 END) - make_interval(mins => CASE key
		WHEN $3 THEN 1 WHEN $4 THEN 2 WHEN $5 THEN 3 WHEN $6 THEN 4 ELSE 0 END)`,
		keyBytes("4"), keyBytes("5"), keyBytes("1"), keyBytes("2"), keyBytes("3"), keyBytes("4"))
	deleted, err := p.Prune(ctx)
	if err != nil || deleted != 3 {
		t.Fatalf("Prune = %d, %v; want 3 deleted (2 by age, 1 past the limit)", deleted, err)
	}
	for i := range 6 {
		_, ok, err := p.Get(ctx, testKey(strconv.Itoa(i)))
		if want := i < 3; ok != want || err != nil {
			t.Errorf("row %d kept: %v, %v; want %v", i, ok, err, want)
		}
		if _, ok, _ := other.Get(ctx, testKey(strconv.Itoa(i))); !ok {
			t.Errorf("chain 2's row %d was pruned with chain 1's", i)
		}
	}
	if n, b, err := p.Size(ctx); n != 3 || b != 3*int64(len(value)) || err != nil {
		t.Errorf("Size = %d, %d, %v; want 3 entries, %d bytes", n, b, err, 3*len(value))
	}
}

func keyBytes(s string) []byte { k := testKey(s); return k[:] }

// TestPostgresRun prunes at once and stops with its context.
func TestPostgresRun(t *testing.T) {
	p := NewPostgres(pgPool(t, pgtest.New(t)), 1, patient(PostgresOptions{MaxRows: 1}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	for i := range 3 {
		if err := p.Set(ctx, testKey(strconv.Itoa(i)), Entry{Value: []byte(`1`), Settled: true}, 0); err != nil {
			t.Fatal(err)
		}
	}
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, 10*time.Second, "the first prune", func() bool {
		n, _, _ := p.Size(ctx)
		return n == 1
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v; want context.Canceled", err)
	}
}

// TestPostgresConnectsFirst: Run opens a connection before the tier is
// asked, so that no call's Get spends its read bound dialing. Until it
// has one, Get misses and Set stores nothing, without an error (no false
// outage, no pause); then both ask Postgres.
func TestPostgresConnectsFirst(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	proxy.Stop() // down at the start
	logs := &testkit.Buffer{}
	p := NewPostgres(pgPool(t, proxy.URL()), 1, PostgresOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	testkit.WaitFor(t, 10*time.Second, "the first connection to fail", func() bool {
		return logs.Count("cache tier cannot connect") == 1
	})
	k := testKey("k")
	e := Entry{Value: []byte(`"0x5"`), Settled: true}
	if err := p.Set(ctx, k, e, 0); err != nil {
		t.Fatalf("Set before a connection = %v; want nothing stored, no error", err)
	}
	if _, ok, err := p.Get(ctx, k); ok || err != nil {
		t.Fatalf("Get before a connection = %v, %v; want a miss, no error", ok, err)
	}
	proxy.Start()
	testkit.WaitFor(t, 10*time.Second, "the tier to connect", func() bool { return logs.Count("cache tier connected") == 1 })
	if _, ok, err := p.Get(ctx, k); ok || err != nil {
		t.Fatalf("Get of the entry set before = %v, %v; want a miss: nothing was stored", ok, err)
	}
	if err := p.Set(ctx, k, e, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := p.Get(ctx, k); !ok || err != nil || !sameEntry(got, e) {
		t.Fatalf("Get once connected = %+v, %v, %v; want the entry", got, ok, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v; want context.Canceled", err)
	}
}

// TestPostgresStalled: a Postgres that stops answering is an error within
// the read timeout, then ErrDown at once; when it answers again the tier
// does too.
func TestPostgresStalled(t *testing.T) {
	const timeout = 200 * time.Millisecond
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	p := NewPostgres(pgPool(t, proxy.URL()), 1, PostgresOptions{ReadTimeout: timeout, WriteTimeout: timeout})
	ctx := t.Context()
	k := testKey("k")
	// On a loaded machine a write may itself take longer than timeout:
	// the stall is what is tested, so the first write may take a few.
	testkit.WaitFor(t, 10*time.Second, "the first write", func() bool {
		return p.Set(ctx, k, Entry{Value: []byte(`"0x5"`), Settled: true}, 0) == nil
	})
	proxy.Pause()
	var err error
	// The stall never ends by itself: the bound tells a timed-out read
	// from one that waits for the server.
	if d := timed(func() { _, _, err = p.Get(ctx, k) }); err == nil || d > timeout+5*time.Second {
		t.Fatalf("Get from a stalled Postgres = %v after %v; want an error within about %v", err, d, timeout)
	}
	// ErrDown is the tier's answer without asking the server.
	if err = p.Set(ctx, testKey("k2"), Entry{Value: []byte(`1`), Settled: true}, 0); !errors.Is(err, ErrDown) {
		t.Fatalf("Set right after = %v; want ErrDown, the server not asked", err)
	}
	if _, err := p.Prune(ctx); !errors.Is(err, ErrDown) {
		t.Fatalf("Prune right after = %v; want ErrDown", err)
	}
	proxy.Resume()
	testkit.WaitFor(t, 10*time.Second, "a hit after the stall", func() bool {
		_, ok, _ := p.Get(ctx, k)
		return ok
	})
}

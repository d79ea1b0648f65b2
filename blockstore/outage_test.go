package blockstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

const (
	outageLog   = "postgres unreachable"
	recoveryLog = "postgres reachable again"
)

// waitUp polls until the store reports Postgres reachable.
func waitUp(t *testing.T, p *Postgres) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !p.Up() {
		if time.Now().After(deadline) {
			t.Fatal("the store did not notice Postgres was back within 30s")
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for state
	}
}

// TestOutage cuts the store off Postgres, at start and while serving:
// calls fail with an error (callers fall through), the gauge and the log
// say so once per outage, and reads resume when Postgres is back, without
// a restart.
func TestOutage(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	proxy.Stop() // down before the store starts

	logs := &testkit.Buffer{}
	reg := prometheus.NewRegistry()
	p, err := Open(context.Background(), proxy.URL(), Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatalf("Open with Postgres down: %v", err)
	}
	t.Cleanup(p.Close)
	c := p.Chain(1, "one")
	ctx := context.Background()
	if p.Up() || testutil.ToFloat64(p.m.up) != 0 || logs.Count(outageLog) != 1 {
		t.Fatalf("opened while down: Up %v, gauge %v, %d outage logs; want false, 0, 1",
			p.Up(), testutil.ToFloat64(p.m.up), logs.Count(outageLog))
	}
	blocks := synthChain(t, "a", 0, 9, 4)
	if err := c.Put(ctx, blocks); err == nil {
		t.Fatal("Put succeeded with Postgres down")
	}

	proxy.Start()
	waitUp(t, p)
	mustPut(t, c, blocks...)
	block := `["0x3",true]`
	want, ok := answer(t, c, "eth_getBlockByNumber", block)
	if !ok || !bytes.Equal(want, blocks[3].Raw) {
		t.Fatalf("after recovery: %v %.200s", ok, want)
	}
	if logs.Count(recoveryLog) != 1 || testutil.ToFloat64(p.m.up) != 1 {
		t.Fatalf("%d recovery logs, gauge %v; want 1, 1", logs.Count(recoveryLog), testutil.ToFloat64(p.m.up))
	}

	// Down while serving: every kind of call fails, and at once.
	proxy.Stop()
	before := testutil.ToFloat64(p.m.errors.WithLabelValues(opAnswer))
	for range 20 {
		if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", []byte(block))); err == nil || ok {
			t.Fatalf("Answer with Postgres down: ok %v, err %v; want an error", ok, err)
		}
	}
	if _, err := c.Logs(ctx, &evm.LogFilter{}, 0, 9); err == nil {
		t.Fatal("Logs with Postgres down: no error")
	}
	if _, err := c.Covered(ctx, 0, 9); err == nil {
		t.Fatal("Covered with Postgres down: no error")
	}
	if _, _, err := c.Highest(ctx); err == nil {
		t.Fatal("Highest with Postgres down: no error")
	}
	start := time.Now()
	_, _, err = c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", []byte(block)))
	if !errors.Is(err, errDown) {
		t.Fatalf("Answer while known down: %v, want errDown without asking Postgres", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Answer while known down took %v", took)
	}
	if p.Up() || logs.Count(outageLog) != 2 {
		t.Fatalf("Up %v, %d outage logs; want false, 2 (one per outage)", p.Up(), logs.Count(outageLog))
	}
	if got := testutil.ToFloat64(p.m.errors.WithLabelValues(opAnswer)) - before; got != 21 {
		t.Fatalf("venn_blockstore_errors_total{op=answer} rose by %v, want 21", got)
	}

	proxy.Start()
	waitUp(t, p)
	got, ok := answer(t, c, "eth_getBlockByNumber", block)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("after the second recovery: %v %.200s", ok, got)
	}
	if logs.Count(recoveryLog) != 2 {
		t.Fatalf("%d recovery logs, want 2", logs.Count(recoveryLog))
	}
	if logs.Count("root@") > 0 {
		t.Fatal("a log names the connection string")
	}
}

// TestTerminatedBackends: Postgres killing the pool's connections
// (pg_terminate_backend, as on a failover or restart) costs no answer.
func TestTerminatedBackends(t *testing.T) {
	u := pgtest.New(t)
	logs := &testkit.Buffer{}
	p, err := Open(context.Background(), u, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := p.Chain(1, "one")
	blocks := synthChain(t, "a", 0, 4, 3)
	mustPut(t, c, blocks...)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.Server())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for round := range 3 {
		for range 4 { // warm both connections
			answer(t, c, "eth_getBlockReceipts", `["0x2"]`)
		}
		var killed int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, pgtest.Name(u)).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed == 0 {
			t.Fatalf("round %d: no backend to terminate", round)
		}
		for range 4 {
			got, ok := answer(t, c, "eth_getBlockReceipts", `["0x2"]`)
			if !ok || !bytes.Equal(got, blocks[2].Receipts) {
				t.Fatalf("round %d: after terminating %d backends: %v %.200s", round, killed, ok, got)
			}
		}
	}
	if !p.Up() {
		t.Fatal("Up() = false after terminated backends were replaced")
	}
}

// stallTimeouts are the store's bounds in TestStall, short for the test;
// slack is what a busy machine may add to them.
const (
	stallRead  = 500 * time.Millisecond
	stallWrite = time.Second
	stallSlack = 3 * time.Second
)

// within runs fn and fails the test when it took longer than d.
func within(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	if took := time.Since(start); took > d {
		t.Fatalf("%s took %v, want at most %v", what, took.Round(time.Millisecond), d)
	}
}

// TestStall puts the store behind a Postgres that accepts connections and
// bytes but stops answering: a write costs at most the write timeout and a
// read the read timeout, both fail (callers fall through), the store is
// then down (further calls fail at once) until a probe gets an answer, and
// nothing of a write cut short is stored. With no calls at all the
// background check notices a stall too.
func TestStall(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	logs := &testkit.Buffer{}
	reg := prometheus.NewRegistry()
	p, err := Open(context.Background(), proxy.URL(), Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Registerer: reg, ReadTimeout: stallRead, WriteTimeout: stallWrite})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := p.Chain(1, "one")
	// The callers' own deadline is far away: only the store's bounds count.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	blocks := synthChain(t, "a", 0, 9, 4)
	mustPut(t, c, blocks[:5]...)
	block := []byte(`["0x3",true]`)
	want, ok := answer(t, c, "eth_getBlockByNumber", string(block))
	if !ok {
		t.Fatal("block 3 not stored")
	}

	proxy.Pause()
	within(t, "Put on a stalled Postgres", stallWrite+stallSlack, func() {
		if err := c.Put(ctx, blocks[5:]); err == nil {
			t.Fatal("Put succeeded on a stalled Postgres")
		}
	})
	if p.Up() || testutil.ToFloat64(p.m.up) != 0 || logs.Count(outageLog) != 1 {
		t.Fatalf("after a write timed out: Up %v, gauge %v, %d outage logs; want false, 0, 1",
			p.Up(), testutil.ToFloat64(p.m.up), logs.Count(outageLog))
	}
	within(t, "Answer while known down", time.Second, func() {
		if _, _, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", block)); !errors.Is(err, errDown) {
			t.Fatalf("Answer while known down: %v, want errDown", err)
		}
	})

	proxy.Resume()
	waitUp(t, p)
	if got, ok := answer(t, c, "eth_getBlockByNumber", string(block)); !ok || !bytes.Equal(got, want) {
		t.Fatalf("after the stall: %v %.200s", ok, got)
	}
	if got := mustCovered(t, c, 0, 9); len(got) != 1 || got[0] != (Range{0, 4}) {
		t.Fatalf("covered %v after a Put cut short, want only 0-4", got)
	}

	proxy.Pause()
	within(t, "Answer on a stalled Postgres", stallRead+stallSlack, func() {
		if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", block)); err == nil || ok {
			t.Fatalf("Answer on a stalled Postgres: ok %v, err %v; want an error", ok, err)
		}
	})
	if p.Up() || logs.Count(outageLog) != 2 {
		t.Fatalf("after a read timed out: Up %v, %d outage logs; want false, 2", p.Up(), logs.Count(outageLog))
	}
	within(t, "reads while known down", time.Second, func() {
		if _, err := c.Logs(ctx, &evm.LogFilter{}, 0, 4); err == nil {
			t.Fatal("Logs on a stalled Postgres: no error")
		}
		if _, err := c.Covered(ctx, 0, 4); err == nil {
			t.Fatal("Covered on a stalled Postgres: no error")
		}
		if _, _, err := c.Highest(ctx); err == nil {
			t.Fatal("Highest on a stalled Postgres: no error")
		}
	})

	proxy.Resume()
	waitUp(t, p)
	mustPut(t, c, blocks[5:]...)
	if got := mustCovered(t, c, 0, 9); len(got) != 1 || got[0] != (Range{0, 9}) {
		t.Fatalf("covered %v, want 0-9", got)
	}

	// No calls: the background check finds the stall by itself.
	proxy.Pause()
	deadline := time.Now().Add(healthInterval + stallRead + stallSlack)
	for p.Up() {
		if time.Now().After(deadline) {
			t.Fatal("a stall with no calls was not noticed")
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for state
	}
	proxy.Resume()
	waitUp(t, p)
	if logs.Count(recoveryLog) != 3 {
		t.Fatalf("%d recovery logs, want 3", logs.Count(recoveryLog))
	}
}

// TestSlowStatement: a statement that Postgres, working, cannot finish in
// time (here: it waits on a lock) ends within the read timeout as that
// statement's failure, cancelled by Postgres itself: no outage, and the
// next read is answered.
func TestSlowStatement(t *testing.T) {
	u := pgtest.New(t)
	logs := &testkit.Buffer{}
	p, err := Open(context.Background(), u, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		ReadTimeout: stallRead, WriteTimeout: stallWrite})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c := p.Chain(1, "one")
	blocks := synthChain(t, "a", 0, 4, 2)
	mustPut(t, c, blocks...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	locker, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(context.Background())
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE blocks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	within(t, "a read blocked on a lock", stallRead+stallSlack, func() {
		if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", []byte(`["0x2",false]`))); err == nil || ok {
			t.Fatalf("Answer blocked on a lock: ok %v, err %v; want an error", ok, err)
		}
	})
	within(t, "a write blocked on a lock", stallWrite+stallSlack, func() {
		if err := c.Put(ctx, synthChain(t, "a", 5, 6, 2)); err == nil {
			t.Fatal("Put blocked on a lock succeeded")
		}
	})
	if !p.Up() || logs.Count(outageLog) != 0 {
		t.Fatalf("Up %v, %d outage logs after slow statements; want true, 0", p.Up(), logs.Count(outageLog))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := answer(t, c, "eth_getBlockByNumber", `["0x2",false]`); !ok {
		t.Fatal("block 2 not answered once the lock was gone")
	}
}

package blockstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/pgtest"
)

// logBuffer collects a logger's output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

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

	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	p, err := Open(context.Background(), proxy.URL(), Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatalf("Open with Postgres down: %v", err)
	}
	t.Cleanup(p.Close)
	c := p.Chain(1, "one")
	ctx := context.Background()
	if p.Up() || testutil.ToFloat64(p.m.up) != 0 || logs.count(outageLog) != 1 {
		t.Fatalf("opened while down: Up %v, gauge %v, %d outage logs; want false, 0, 1",
			p.Up(), testutil.ToFloat64(p.m.up), logs.count(outageLog))
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
	if logs.count(recoveryLog) != 1 || testutil.ToFloat64(p.m.up) != 1 {
		t.Fatalf("%d recovery logs, gauge %v; want 1, 1", logs.count(recoveryLog), testutil.ToFloat64(p.m.up))
	}

	// Down while serving: every kind of call fails, and at once.
	proxy.Stop()
	before := testutil.ToFloat64(p.m.errors.WithLabelValues(opAnswer))
	for range 20 {
		if _, ok, err := c.Answer(ctx, "eth_getBlockByNumber", []byte(block)); err == nil || ok {
			t.Fatalf("Answer with Postgres down: ok %v, err %v; want an error", ok, err)
		}
	}
	if _, err := c.Logs(ctx, []byte(`{}`), 0, 9); err == nil {
		t.Fatal("Logs with Postgres down: no error")
	}
	if _, err := c.Covered(ctx, 0, 9); err == nil {
		t.Fatal("Covered with Postgres down: no error")
	}
	if _, _, err := c.Highest(ctx); err == nil {
		t.Fatal("Highest with Postgres down: no error")
	}
	start := time.Now()
	_, _, err = c.Answer(ctx, "eth_getBlockByNumber", []byte(block))
	if !errors.Is(err, errDown) {
		t.Fatalf("Answer while known down: %v, want errDown without asking Postgres", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Answer while known down took %v", took)
	}
	if p.Up() || logs.count(outageLog) != 2 {
		t.Fatalf("Up %v, %d outage logs; want false, 2 (one per outage)", p.Up(), logs.count(outageLog))
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
	if logs.count(recoveryLog) != 2 {
		t.Fatalf("%d recovery logs, want 2", logs.count(recoveryLog))
	}
	if logs.count("root@") > 0 {
		t.Fatal("a log names the connection string")
	}
}

// TestTerminatedBackends: Postgres killing the pool's connections
// (pg_terminate_backend, as on a failover or restart) costs no answer.
func TestTerminatedBackends(t *testing.T) {
	u := pgtest.New(t)
	logs := &logBuffer{}
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

package migrations_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/migrations"
)

// TestUpConcurrent starts several replicas' migrations on a fresh database
// at once: all succeed, every version is applied exactly once (by one of
// them), and the tables exist.
func TestUpConcurrent(t *testing.T) {
	u := pgtest.Empty(t)
	const replicas = 4
	var wg sync.WaitGroup
	applied := make([][]int64, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() { applied[i], errs[i] = migrations.Up(context.Background(), u, nil) })
	}
	wg.Wait()
	var all []int64
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	slices.Sort(all)
	if want := embedded(t); !slices.Equal(all, want) {
		t.Fatalf("versions applied across replicas: %v; want %v, each once", all, want)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version_id FROM goose_db_version WHERE version_id > 0 ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recorded, all) {
		t.Fatalf("goose_db_version holds %v, want %v", recorded, all)
	}
	for _, table := range []string{"blocks", "transactions", "logs", "coverage", "cache_entries", "history_partitions"} {
		if _, err := conn.Exec(ctx, "SELECT 1 FROM "+table+" LIMIT 1"); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	var method string
	if err := conn.QueryRow(ctx, `SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam
		WHERE c.relname = 'logs_topic2'`).Scan(&method); err != nil || method != "hash" {
		t.Errorf("logs_topic2 is a %q index (%v), want hash", method, err)
	}

	// Once more: nothing to apply.
	again, err := migrations.Up(ctx, u, nil)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Up applied %v, %v; want nothing", again, err)
	}
}

// TestUpUnreachable: an unreachable server is an error, not a hang.
func TestUpUnreachable(t *testing.T) {
	ctx := context.Background()
	_, err := migrations.Up(ctx, "postgres://root@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", nil)
	if err == nil {
		t.Fatal("Up against a closed port succeeded")
	}
}

// embedded is the versions of the migration files in sql/, in order.
func embedded(t *testing.T) []int64 {
	t.Helper()
	entries, err := os.ReadDir("sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		v, _, _ := strings.Cut(e.Name(), "_")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("migration file %s: %v", e.Name(), err)
		}
		out = append(out, n)
	}
	return out
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/jrpc"
)

const testChainID = 1337

// historyConfig is a file with chain "test" on node and the history store
// at url. The fake node's hashes are synthetic: integrity checks are off.
func historyConfig(t *testing.T, url string, node *fakenode.Node) string {
	t.Helper()
	return writeFile(t, `
metrics_listen: ""
postgres: {url: "`+url+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 100ms
    integrity: {stalker: false}
    remotes: [{name: a, url: "`+node.URL()+`"}]
`)
}

// openHistory opens the test database's store of chain "test".
func openHistory(t *testing.T, url string) *blockstore.Chain {
	t.Helper()
	pg, err := blockstore.Open(context.Background(), url, blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	return pg.Chain(testChainID, "test")
}

func covered(t *testing.T, hist *blockstore.Chain) string {
	t.Helper()
	rs, err := hist.Covered(context.Background(), 0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(rs)
}

// countFetches counts the node's eth_getBlockByNumber calls for a whole
// block per block number (tags not counted).
func countFetches(node *fakenode.Node) func() map[uint64]int {
	var mu sync.Mutex
	seen := map[uint64]int{}
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_getBlockByNumber" {
			return nil, nil, false
		}
		var args []json.RawMessage
		var s string
		// Blocks with their transactions: the pool's header reads (head
		// polls, the older block it reads to learn the block time) are no
		// fetches.
		if json.Unmarshal(params, &args) == nil && len(args) == 2 && string(args[1]) == "true" && json.Unmarshal(args[0], &s) == nil {
			if n, err := evm.ParseQuantity(s); err == nil {
				mu.Lock()
				seen[n]++
				mu.Unlock()
			}
		}
		return nil, nil, false
	})
	return func() map[uint64]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[uint64]int, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

func TestMigrate(t *testing.T) {
	url := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	cfg := historyConfig(t, url, node)
	noPG := writeFile(t, "chains: [{name: test, chain_id: 1337, remotes: [{name: a, url: \"http://127.0.0.1:1\"}]}]\n")
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "first run applies every migration", give: []string{"migrate", "--config", cfg},
			wantStdout: "applied migrations: 1"},
		{name: "second run has nothing to do", give: []string{"migrate", "--config", cfg},
			wantStdout: "schema up to date: no migration to apply\n"},
		{name: "no --config", give: []string{"migrate"}, wantCode: exitUsage,
			wantStderr: "venn migrate: --config is required"},
		{name: "no postgres.url", give: []string{"migrate", "--config", noPG}, wantCode: exitError,
			wantStderr: "postgres.url is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.give, &stdout, &stderr); got != tt.wantCode {
				t.Fatalf("exit code = %d, want %d\nstdout: %s\nstderr: %s", got, tt.wantCode, &stdout, &stderr)
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q, want it to start with %q", &stdout, tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q lacks %q", &stderr, tt.wantStderr)
			}
		})
	}
}

func TestMigrateWithPostgresDownSaysSoWithoutThePassword(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	cfg := historyConfig(t, "postgres://venn:SECRETPW@127.0.0.1:1/venn?sslmode=disable&connect_timeout=2", node)
	var stdout, stderr bytes.Buffer
	if got := run([]string{"migrate", "--config", cfg}, &stdout, &stderr); got != exitError {
		t.Fatalf("exit code = %d, want %d\nstderr: %s", got, exitError, &stderr)
	}
	if strings.Contains(stderr.String(), "SECRETPW") || strings.Contains(stdout.String(), "SECRETPW") {
		t.Errorf("the password is shown:\n%s%s", &stdout, &stderr)
	}
	if !strings.Contains(stderr.String(), "venn migrate:") {
		t.Errorf("stderr does not say what failed: %s", &stderr)
	}
}

func TestBackfill(t *testing.T) {
	url := pgtest.Empty(t)
	// No finalized block within reach: the line is head - 64 = 436.
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	fetches := countFetches(node)
	cfg := historyConfig(t, url, node)
	hist := openHistory(t, url)

	var stdout, stderr bytes.Buffer
	if code := run([]string{"backfill", "--config", cfg, "--chain", "test", "--from", "10", "--to", "300"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstderr: %s", code, &stderr)
	}
	if want := "backfilled test 10..300: 291 blocks stored, 0 already stored"; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("stdout %q, want %q...", &stdout, want)
	}
	if !strings.Contains(stderr.String(), "backfill 291/291 blocks (100.0%)") {
		t.Errorf("no final progress line on stderr:\n%s", &stderr)
	}
	if got := covered(t, hist); got != "[{10 300}]" {
		t.Errorf("covered %s after the first run", got)
	}

	// Resumed over a wider range: only what is missing is fetched. A range
	// above the settled line is cut at it.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"backfill", "--config", cfg, "--chain", "test", "--from", "0", "--to", "480", "--concurrency", "3"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d\nstderr: %s", code, &stderr)
	}
	if want := "blocks above the settled line 436 are not stored: backfilling 0..436"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, &stderr)
	}
	if want := "backfilled test 0..436: 146 blocks stored, 291 already stored"; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("stdout %q, want %q...", &stdout, want)
	}
	if got := covered(t, hist); got != "[{0 436}]" {
		t.Errorf("covered %s after the second run", got)
	}
	for n, k := range fetches() {
		if k != 1 {
			t.Errorf("block %d fetched %d times", n, k)
		}
		if n > 436 {
			t.Errorf("block %d above the settled line fetched", n)
		}
	}
	for _, n := range []uint64{0, 10, 300, 436} {
		res, ok, err := hist.Answer(context.Background(), evm.ParseCall("eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`)))
		if err != nil || !ok || !strings.Contains(string(res), node.BlockHash(n)) {
			t.Errorf("block %d from the store: ok %v err %v: %.100s", n, ok, err, res)
		}
	}
}

func TestBackfillRefusesWhatIsNotSettled(t *testing.T) {
	url := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 50})
	cfg := historyConfig(t, url, node)
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStderr string
	}{
		{name: "above the finalized block", give: []string{"--from", "60", "--to", "70"}, wantCode: exitError,
			wantStderr: "nothing settled from 60: the settled line is 36"},
		{name: "no --to", give: []string{"--from", "1"}, wantCode: exitUsage, wantStderr: "--to is required"},
		{name: "from above to", give: []string{"--from", "5", "--to", "1"}, wantCode: exitUsage,
			wantStderr: "--from 5 is above --to 1"},
		{name: "bad concurrency", give: []string{"--to", "1", "--concurrency", "0"}, wantCode: exitUsage,
			wantStderr: "--concurrency must be in [1, 256]"},
		{name: "unknown chain", give: []string{"--to", "1", "--chain", "nope"}, wantCode: exitUsage,
			wantStderr: `no chain "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"backfill", "--config", cfg, "--chain", "test"}, tt.give...)
			var stdout, stderr bytes.Buffer
			if got := run(args, &stdout, &stderr); got != tt.wantCode {
				t.Fatalf("exit code = %d, want %d\nstderr: %s", got, tt.wantCode, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q lacks %q", &stderr, tt.wantStderr)
			}
		})
	}
}

// TestBackfillTwoReplicasSplitTheWork runs two backfills of one range at
// once: between them every block is fetched and stored exactly once, and
// the range is covered completely.
func TestBackfillTwoReplicasSplitTheWork(t *testing.T) {
	url := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 1100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	node.SetLatency(5 * time.Millisecond) // a little network, so both take part
	fetches := countFetches(node)
	cfg := historyConfig(t, url, node)
	// Migrated first, so that neither waits a second for the other's
	// migration lock and finds the work done.
	if code := run([]string{"migrate", "--config", cfg}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("migrate: exit code %d", code)
	}

	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			var stdout, stderr bytes.Buffer
			code := run([]string{"backfill", "--config", cfg, "--chain", "test", "--from", "0", "--to", "999", "--concurrency", "4"}, &stdout, &stderr)
			results[i] = result{code, stdout.String(), stderr.String()}
		})
	}
	wg.Wait()

	storedRE := regexp.MustCompile(`: (\d+) blocks stored, (\d+) already stored`)
	total := 0
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("backfill %d: exit code %d\nstderr: %s", i, r.code, r.stderr)
		}
		m := storedRE.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("backfill %d: stdout %q", i, r.stdout)
		}
		n, _ := strconv.Atoi(m[1])
		if n == 0 {
			t.Errorf("backfill %d stored nothing: the work was not split (%s)", i, strings.TrimSpace(r.stdout))
		}
		total += n
		t.Logf("backfill %d: %s", i, strings.TrimSpace(r.stdout))
	}
	if total != 1000 {
		t.Errorf("the two stored %d blocks between them, want 1000", total)
	}
	got := fetches()
	for n := range uint64(1000) {
		if got[n] != 1 {
			t.Errorf("block %d fetched %d times", n, got[n])
		}
	}
	if c := covered(t, openHistory(t, url)); c != "[{0 999}]" {
		t.Errorf("covered %s, want [{0 999}]", c)
	}
}

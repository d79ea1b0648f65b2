package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/migrations"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
)

// Defaults of the history bench.
const (
	defaultHistoryBlocks = 100_000
	defaultHistoryRuns   = 7
	defaultHistoryCap    = 1000
	defaultHistoryPG     = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"
	historyBenchDB       = "vennbench_history"
	historyChainID       = 1337

	// fillBatch blocks are fetched from the fake node in one HTTP batch
	// (two calls each) and stored in one Put.
	fillBatch       = 500
	fillConcurrency = 4
)

// historyConfig is the parsed command line of `vennbench history`.
type historyConfig struct {
	Blocks    uint64
	Runs      int
	Cap       uint64          // the remote's eth_getLogs range cap
	Latencies []time.Duration // added to every upstream answer, one measurement each
	PG        string          // the server to create the bench's database on
	DB        string          // the bench's database, created afresh
	Keep      bool
}

const historyUsage = `vennbench history — eth_getLogs over many blocks from Postgres vs the remotes

Fills a history store (a database it creates on -pg) with -blocks blocks of
the fake node's chain, then times one eth_getLogs over all of them with an
address and a topic0, from the store and through a remotes pool split by
the remote's -cap, at each -latency.

Usage:
  vennbench history [flags]

Flags:
`

func parseHistoryFlags(args []string, stderr io.Writer) (historyConfig, int) {
	fs := newFlags("history", historyUsage, stderr)
	var cfg historyConfig
	fs.Uint64Var(&cfg.Blocks, "blocks", defaultHistoryBlocks, "blocks stored and queried")
	fs.IntVar(&cfg.Runs, "runs", defaultHistoryRuns, "timed runs of each query (the median is reported)")
	fs.Uint64Var(&cfg.Cap, "cap", defaultHistoryCap, "the remote's eth_getLogs range cap, in blocks (the pool splits by it)")
	latencies := fs.String("latency", "0s,50ms", "comma-separated latencies added to every upstream answer, each measured (0s: a local node)")
	fs.StringVar(&cfg.PG, "pg", defaultHistoryPG, "Postgres server (any database on it) to create the bench's database on")
	fs.StringVar(&cfg.DB, "db", historyBenchDB, "the bench's database: dropped and created afresh")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the database afterwards")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	switch {
	case cfg.Blocks < 1000 || cfg.Blocks > 10_000_000:
		fmt.Fprintln(stderr, "vennbench history: -blocks must be in [1000, 10000000]")
		return cfg, exitUsage
	case cfg.Runs < 1 || cfg.Runs > maxRounds:
		fmt.Fprintf(stderr, "vennbench history: -runs must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	case !dbNameRE.MatchString(cfg.DB):
		fmt.Fprintln(stderr, "vennbench history: -db must match [a-z_][a-z0-9_]*")
		return cfg, exitUsage
	case cfg.Cap < 1:
		fmt.Fprintln(stderr, "vennbench history: -cap must be at least 1")
		return cfg, exitUsage
	}
	for f := range strings.SplitSeq(*latencies, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 || d > time.Second {
			fmt.Fprintf(stderr, "vennbench history: -latency: %q is not a duration in [0, 1s]\n", f)
			return cfg, exitUsage
		}
		cfg.Latencies = append(cfg.Latencies, d)
	}
	return cfg, -1
}

// historyBench fills a fresh database with blocks 1..Blocks of the fake
// node's chain through the blockstore's Put, then times one eth_getLogs
// over the whole range with an address and a topic0, answered by a router
// with the history store and by one without it (the remotes pool, which
// splits the range by the remote's cap). Both answers must be the same
// bytes.
func historyBench(ctx context.Context, cfg historyConfig, stdout, stderr io.Writer) error {
	node := fakenode.New(fakenode.Options{ChainID: historyChainID, Head: cfg.Blocks + 64})
	if err := node.Start(); err != nil {
		return err
	}
	defer node.Close()

	dbURL, drop, err := benchDatabase(ctx, cfg.PG, cfg.DB, cfg.Keep)
	if err != nil {
		return err
	}
	defer drop()
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	pg, err := blockstore.Open(ctx, dbURL, blockstore.Options{})
	if err != nil {
		return err
	}
	defer pg.Close()
	hist := pg.Chain(historyChainID, "bench")

	fmt.Fprintf(stderr, "filling %d blocks...\n", cfg.Blocks)
	fill, err := fillHistory(ctx, node, hist, cfg.Blocks, stderr)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	storage, err := measureStorage(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}

	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "bench", ChainID: historyChainID,
		BlockTime: time.Second, CallDeadline: 5 * time.Minute, GetLogsMaxParts: 100_000},
		[]remotes.Config{{Name: "node", URL: node.URL(), Timeout: 2 * time.Minute, MaxLogsRange: cfg.Cap}}, nil, nil)
	if err != nil {
		return err
	}
	if err := pool.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = pool.Stop(context.Background()) }()
	settled := func() (uint64, bool) { return cfg.Blocks, true }
	fromStore := router.New(router.Config{Chain: "bench", ChainID: historyChainID, History: hist, Settled: settled}, nil, pool, nil)
	fromRemotes := router.New(router.Config{Chain: "bench", ChainID: historyChainID}, nil, pool, nil)

	filter := fmt.Sprintf(`[{"fromBlock":"%s","toBlock":"%s","address":"%s","topics":["%s"]}]`,
		evm.Quantity(1), evm.Quantity(cfg.Blocks), fakenode.Contracts()[0], fakenode.Topic0s()[0])
	req := &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getLogs", Params: json.RawMessage(filter)}

	store, err := timeLogs(ctx, fromStore, req, node, cfg.Runs)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	var remote []historyResult
	for _, d := range cfg.Latencies {
		node.SetLatency(d)
		r, err := timeLogs(ctx, fromRemotes, req, node, cfg.Runs)
		if err != nil {
			return fmt.Errorf("remotes, latency %v: %w", d, err)
		}
		if !bytes.Equal(store.answer, r.answer) {
			return fmt.Errorf("the store's answer (%d bytes) differs from the remotes' (%d bytes)",
				len(store.answer), len(r.answer))
		}
		remote = append(remote, r)
	}
	node.SetLatency(0)
	writeHistoryReport(stdout, cfg, fill, storage, store, remote)
	return nil
}

// benchDatabase creates the bench's database afresh and returns its URL
// and what drops it (unless keep).
func benchDatabase(ctx context.Context, adminURL, name string, keep bool) (string, func(), error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		admin.Close(ctx)
		return "", nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		return "", nil, err
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		admin.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !keep {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
		admin.Close(ctx)
	}, nil
}

// dbNameRE is what -db may be: it is spliced into SQL.
var dbNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// fillStats is how the store was filled.
type fillStats struct {
	took     time.Duration
	putTook  time.Duration // inside Put only
	rawBytes int64         // the node's JSON: blocks with transactions, and receipts
	logs     int
}

// fillHistory fetches blocks 1..n with their receipts from the node in
// batches and stores them with Put, a few batches at once.
func fillHistory(ctx context.Context, node *fakenode.Node, hist *blockstore.Chain, n uint64, stderr io.Writer) (fillStats, error) {
	var st fillStats
	start := time.Now()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	type batch struct {
		blocks []*evm.Block
		raw    int64
	}
	batches := make(chan batch, fillConcurrency)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(batches)
		fg, fctx := errgroup.WithContext(gctx)
		fg.SetLimit(fillConcurrency)
		for from := uint64(1); from <= n; from += fillBatch {
			fg.Go(func() error {
				blocks, raw, err := fetchBatch(fctx, client, node.URL(), from, min(n, from+fillBatch-1))
				if err != nil {
					return err
				}
				select {
				case batches <- batch{blocks, raw}:
					return nil
				case <-fctx.Done():
					return fctx.Err()
				}
			})
		}
		return fg.Wait()
	})
	g.Go(func() error {
		done, last := uint64(0), time.Now()
		for b := range batches {
			t := time.Now()
			if err := hist.Put(gctx, b.blocks); err != nil {
				return err
			}
			st.putTook += time.Since(t)
			st.rawBytes += b.raw
			done += uint64(len(b.blocks))
			if time.Since(last) > 5*time.Second {
				fmt.Fprintf(stderr, "  %d/%d blocks stored\n", done, n)
				last = time.Now()
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return st, err
	}
	st.took = time.Since(start)
	return st, nil
}

// fetchBatch fetches blocks from..to (full transactions) and their
// receipts in one HTTP batch.
func fetchBatch(ctx context.Context, client *http.Client, nodeURL string, from, to uint64) ([]*evm.Block, int64, error) {
	var body bytes.Buffer
	body.WriteByte('[')
	for n := from; n <= to; n++ {
		if n > from {
			body.WriteByte(',')
		}
		q := evm.Quantity(n)
		fmt.Fprintf(&body, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["%s",true]},`, 2*n, q)
		fmt.Fprintf(&body, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockReceipts","params":["%s"]}`, 2*n+1, q)
	}
	body.WriteByte(']')
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, nodeURL, &body)
	if err != nil {
		return nil, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var replies []struct {
		ID     uint64          `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&replies); err != nil {
		return nil, 0, fmt.Errorf("blocks %d..%d: %w", from, to, err)
	}
	raws := make([][2]json.RawMessage, to-from+1)
	var size int64
	for _, r := range replies {
		if r.Error != nil {
			return nil, 0, fmt.Errorf("block %d: %w", r.ID/2, r.Error)
		}
		raws[r.ID/2-from][r.ID%2] = r.Result
		size += int64(len(r.Result))
	}
	out := make([]*evm.Block, len(raws))
	for i, r := range raws {
		b, err := evm.ParseBlock(r[0], r[1])
		if err != nil {
			return nil, 0, fmt.Errorf("block %d: %w", from+uint64(i), err)
		}
		out[i] = b
	}
	return out, size, nil
}

// storageStats is the database's size after the fill.
type storageStats struct {
	tables []tableSize
	total  int64
}

type tableSize struct {
	name    string
	rows    int64
	bytes   int64 // with indexes and TOAST
	indexes int64 // of which indexes
}

func measureStorage(ctx context.Context, dbURL string) (storageStats, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return storageStats{}, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return storageStats{}, err
	}
	rows, err := conn.Query(ctx, `
SELECT c.relname, c.reltuples::bigint, pg_total_relation_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
ORDER BY 3 DESC`)
	if err != nil {
		return storageStats{}, err
	}
	var st storageStats
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.name, &t.rows, &t.bytes, &t.indexes); err != nil {
			return storageStats{}, err
		}
		st.tables = append(st.tables, t)
		st.total += t.bytes
	}
	return st, rows.Err()
}

// historyResult is one source's timed runs of the query.
type historyResult struct {
	times  []float64 // ms
	calls  float64   // upstream eth_getLogs calls per query
	answer json.RawMessage
	logs   int
}

func timeLogs(ctx context.Context, rt *router.Router, req *jrpc.Request, node *fakenode.Node, runs int) (historyResult, error) {
	var r historyResult
	before := node.Calls("eth_getLogs")
	// One untimed run warms connections and caches alike for both.
	for i := range runs + 1 {
		start := time.Now()
		res, err := rt.ServeRPC(ctx, req)
		took := time.Since(start)
		if err != nil {
			return r, err
		}
		if i == 0 {
			before = node.Calls("eth_getLogs")
			r.answer = res
			continue
		}
		r.times = append(r.times, float64(took)/float64(time.Millisecond))
	}
	r.calls = float64(node.Calls("eth_getLogs")-before) / float64(runs)
	var logs []json.RawMessage
	if err := json.Unmarshal(r.answer, &logs); err != nil {
		return r, err
	}
	r.logs = len(logs)
	return r, nil
}

func writeHistoryReport(w io.Writer, cfg historyConfig, fill fillStats, st storageStats, store historyResult, remote []historyResult) {
	fmt.Fprintf(w, "\n%s; load average %s\n", machineInfo(), loadAvg())
	fmt.Fprintf(w, "eth_getLogs over blocks 1..%d, address %s, topic0 %s: %d logs, %d bytes; remote cap %d blocks; %d runs each\n\n",
		cfg.Blocks, fakenode.Contracts()[0], fakenode.Topic0s()[0], store.logs, len(store.answer), cfg.Cap, cfg.Runs)
	fmt.Fprintln(w, "| source | median ms | min ms | max ms | upstream eth_getLogs calls per query | median ÷ history's |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	row := func(name string, r historyResult) {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.0f | %.1f× |\n", name, median(r.times), minOf(r.times), maxOf(r.times),
			r.calls, median(r.times)/median(store.times))
	}
	row("history store (Postgres)", store)
	for i, r := range remote {
		row(fmt.Sprintf("remotes, split by the cap, +%v per call", cfg.Latencies[i]), r)
	}
	fmt.Fprintf(w, "\nupstream calls saved per query: %.0f\n\n", remote[0].calls-store.calls)

	fmt.Fprintf(w, "fill: %d blocks in %s (%.0f blocks/s end to end; Put alone %.0f blocks/s)\n",
		cfg.Blocks, fill.took.Round(time.Millisecond), float64(cfg.Blocks)/fill.took.Seconds(), float64(cfg.Blocks)/fill.putTook.Seconds())
	fmt.Fprintf(w, "storage: %d bytes in all, %.0f bytes per block; the node's JSON (block with transactions + receipts) was %.0f bytes per block (%.2f× stored)\n\n",
		st.total, float64(st.total)/float64(cfg.Blocks), float64(fill.rawBytes)/float64(cfg.Blocks), float64(st.total)/float64(fill.rawBytes))
	fmt.Fprintln(w, "| table | rows (estimate) | bytes with indexes | of which indexes | bytes per block |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, t := range st.tables {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.0f |\n", t.name, t.rows, t.bytes, t.indexes, float64(t.bytes)/float64(cfg.Blocks))
	}
}

func minOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

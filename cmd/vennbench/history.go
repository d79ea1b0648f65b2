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
	"slices"
	"strings"
	"sync"
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
	defaultHistoryBlocks     = 1_000_000
	defaultHistoryContracts  = 1000
	defaultHistoryRange      = 10_000
	defaultHistoryRuns       = 100
	defaultHistoryRemoteRuns = 3
	defaultHistoryCap        = 1000
	defaultHistoryPG         = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"
	historyBenchDB           = "vennbench_history"
	historyChainID           = 1337

	// fillBatch blocks are fetched from the fake node in one HTTP batch
	// (two calls each) and stored in one Put (one COPY transaction).
	fillBatch       = 500
	fillConcurrency = 4
	fillWriters     = 2
)

// historyConfig is the parsed command line of `vennbench history`.
type historyConfig struct {
	Blocks     uint64
	Contracts  int
	Range      uint64 // blocks of the selective query
	Runs       int    // timed runs of each query from the store
	RemoteRuns int    // timed runs of each query through the remotes
	Cap        uint64 // the remote's eth_getLogs range cap
	Latencies  []time.Duration
	PG         string // the server to create the bench's database on
	DB         string // the bench's database, created afresh
	Keep       bool
}

const historyUsage = `vennbench history — eth_getLogs over many blocks from Postgres vs the remotes

Fills a history store (a database it creates on -pg) with -blocks blocks of
the fake node's chain, whose logs come from -contracts contracts, then times
two eth_getLogs, each with one contract's address and one event's topic0:
a selective one over -range blocks and a wide one over every block, from
the store and through a remotes pool that splits them by the remote's
-cap, at each -latency. Each run asks another contract (and, selective,
another range); p50 and p99 are reported.

Usage:
  vennbench history [flags]

Flags:
`

func parseHistoryFlags(args []string, stderr io.Writer) (historyConfig, int) {
	fs := newFlags("history", historyUsage, stderr)
	var cfg historyConfig
	fs.Uint64Var(&cfg.Blocks, "blocks", defaultHistoryBlocks, "blocks stored and queried")
	fs.IntVar(&cfg.Contracts, "contracts", defaultHistoryContracts, "contracts the logs come from, in turn")
	fs.Uint64Var(&cfg.Range, "range", defaultHistoryRange, "blocks of the selective query")
	fs.IntVar(&cfg.Runs, "runs", defaultHistoryRuns, "timed runs of each query from the store")
	fs.IntVar(&cfg.RemoteRuns, "remote-runs", defaultHistoryRemoteRuns, "timed runs of each query through the remotes, at each latency")
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
	case cfg.Contracts < 3 || cfg.Contracts > 1_000_000:
		fmt.Fprintln(stderr, "vennbench history: -contracts must be in [3, 1000000]")
		return cfg, exitUsage
	case cfg.Range < 1 || cfg.Range > cfg.Blocks:
		fmt.Fprintln(stderr, "vennbench history: -range must be in [1, -blocks]")
		return cfg, exitUsage
	case cfg.Runs < 1 || cfg.Runs > 10_000, cfg.RemoteRuns < 1 || cfg.RemoteRuns > cfg.Runs:
		fmt.Fprintln(stderr, "vennbench history: -runs must be in [1, 10000], -remote-runs in [1, -runs]")
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

// historyQuery is one of the bench's two eth_getLogs, asked runs+1 times
// (the first untimed), each time of another contract.
type historyQuery struct {
	name string
	reqs []*jrpc.Request
}

// historyQueries returns the selective query (-range blocks at a spread
// of places) and the wide one (every block).
func historyQueries(cfg historyConfig, contracts []string) []historyQuery {
	topic := fakenode.Topic0s()[0]
	req := func(from, to uint64, contract string) *jrpc.Request {
		filter := fmt.Sprintf(`[{"fromBlock":"%s","toBlock":"%s","address":"%s","topics":["%s"]}]`,
			evm.Quantity(from), evm.Quantity(to), contract, topic)
		return &jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getLogs", Params: json.RawMessage(filter)}
	}
	selective := historyQuery{name: fmt.Sprintf("selective: one contract, one event, %d blocks", cfg.Range)}
	wide := historyQuery{name: fmt.Sprintf("wide: one contract, one event, blocks 1..%d", cfg.Blocks)}
	for i := range cfg.Runs + 1 {
		// Steps co-prime with the counts visit contracts and places evenly.
		contract := contracts[(i*7919)%len(contracts)]
		from := 1 + uint64(i)*104_729%(cfg.Blocks-cfg.Range+1)
		selective.reqs = append(selective.reqs, req(from, from+cfg.Range-1, contract))
		wide.reqs = append(wide.reqs, req(1, cfg.Blocks, contract))
	}
	return []historyQuery{selective, wide}
}

// historyBench fills a fresh database with blocks 1..Blocks of the fake
// node's chain through the blockstore's Put, then times each query,
// answered by a router with the history store and by one without it (the
// remotes pool, which splits the range by the remote's cap). Both answers
// must be the same bytes.
func historyBench(ctx context.Context, cfg historyConfig, stdout, stderr io.Writer) error {
	node := fakenode.New(fakenode.Options{ChainID: historyChainID, Head: cfg.Blocks + 64, Contracts: cfg.Contracts})
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
	fromStore := router.New(router.Config{Chain: "bench", ChainID: historyChainID, History: hist, Settled: settled}, nil, router.UpstreamOf(pool, pool.Heads()), nil)
	fromRemotes := router.New(router.Config{Chain: "bench", ChainID: historyChainID}, nil, router.UpstreamOf(pool, pool.Heads()), nil)

	var results []queryResults
	for _, q := range historyQueries(cfg, node.Contracts()) {
		fmt.Fprintf(stderr, "%s...\n", q.name)
		qr := queryResults{name: q.name}
		if qr.store, err = timeLogs(ctx, fromStore, q.reqs, node); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		for _, d := range cfg.Latencies {
			node.SetLatency(d)
			r, err := timeLogs(ctx, fromRemotes, q.reqs[:cfg.RemoteRuns+1], node)
			if err != nil {
				return fmt.Errorf("remotes, latency %v: %w", d, err)
			}
			for i, a := range r.answers {
				if !bytes.Equal(qr.store.answers[i], a) {
					return fmt.Errorf("%s, run %d: the store's answer (%d bytes) differs from the remotes' (%d bytes)",
						q.name, i, len(qr.store.answers[i]), len(a))
				}
			}
			qr.remote = append(qr.remote, r)
		}
		node.SetLatency(0)
		results = append(results, qr)
	}
	writeHistoryReport(stdout, cfg, fill, storage, results)
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
	rawBytes int64 // the node's JSON: blocks with transactions, and receipts
	logs     int
}

// fillHistory fetches blocks 1..n with their receipts from the node in
// batches and stores them with Put (COPY), a few batches at once.
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
	var mu sync.Mutex // st, and the progress
	last := time.Now()
	var done uint64
	for range fillWriters {
		g.Go(func() error {
			for b := range batches {
				if err := hist.Put(gctx, b.blocks); err != nil {
					return err
				}
				mu.Lock()
				st.rawBytes += b.raw
				done += uint64(len(b.blocks))
				if time.Since(last) > 5*time.Second {
					fmt.Fprintf(stderr, "  %d/%d blocks stored\n", done, n)
					last = time.Now()
				}
				mu.Unlock()
			}
			return nil
		})
	}
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
	parts   int   // partitions (1: not partitioned)
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
	// Partitions count under their parent table.
	rows, err := conn.Query(ctx, `
SELECT coalesce(p.relname, c.relname), sum(greatest(c.reltuples, 0))::bigint,
	sum(pg_total_relation_size(c.oid))::bigint, sum(pg_indexes_size(c.oid))::bigint, count(*)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
GROUP BY 1 ORDER BY 3 DESC`)
	if err != nil {
		return storageStats{}, err
	}
	var st storageStats
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.name, &t.rows, &t.bytes, &t.indexes, &t.parts); err != nil {
			return storageStats{}, err
		}
		st.tables = append(st.tables, t)
		st.total += t.bytes
	}
	return st, rows.Err()
}

// historyResult is one source's timed runs of a query.
type historyResult struct {
	times   []float64 // ms
	calls   float64   // upstream eth_getLogs calls per query
	answers []json.RawMessage
	logs    float64 // per answer
	bytes   float64 // per answer
}

// queryResults is one query's results: the store's, and the remotes' at
// each latency.
type queryResults struct {
	name   string
	store  historyResult
	remote []historyResult
}

// timeLogs asks rt reqs in turn, the first untimed (it warms connections
// and caches alike for both sources).
func timeLogs(ctx context.Context, rt *router.Router, reqs []*jrpc.Request, node *fakenode.Node) (historyResult, error) {
	var r historyResult
	var before int64
	for i, req := range reqs {
		if i == 1 {
			before = node.Calls("eth_getLogs")
		}
		start := time.Now()
		res, err := rt.ServeRPC(ctx, req)
		took := time.Since(start)
		if err != nil {
			return r, err
		}
		r.answers = append(r.answers, res)
		if i == 0 {
			continue
		}
		r.times = append(r.times, float64(took)/float64(time.Millisecond))
		var logs []json.RawMessage
		if err := json.Unmarshal(res, &logs); err != nil {
			return r, err
		}
		r.logs += float64(len(logs))
		r.bytes += float64(len(res))
	}
	runs := float64(len(reqs) - 1)
	r.calls = float64(node.Calls("eth_getLogs")-before) / runs
	r.logs /= runs
	r.bytes /= runs
	return r, nil
}

// pct is the nearest-rank p-th percentile of xs.
func pct(xs []float64, p float64) float64 {
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x * float64(time.Millisecond))
	}
	slices.Sort(ds)
	return float64(percentile(ds, p)) / float64(time.Millisecond)
}

// Goals of the selective query.
const (
	goalSelectiveP50 = 20.0 // ms, from the store
	goalSpeedup      = 20.0 // × the split remotes at 50 ms
)

func writeHistoryReport(w io.Writer, cfg historyConfig, fill fillStats, st storageStats, results []queryResults) {
	fmt.Fprintf(w, "\n%s; load average %s\n", machineInfo(), loadAvg())
	fmt.Fprintf(w, "%d blocks, logs from %d contracts; each query names one contract's address and topic0 %s; remote cap %d blocks; "+
		"%d runs from the store, %d through the remotes at each latency\n\n",
		cfg.Blocks, cfg.Contracts, fakenode.Topic0s()[0], cfg.Cap, cfg.Runs, cfg.RemoteRuns)
	fmt.Fprintln(w, "| query | source | p50 ms | p99 ms | max ms | logs per answer | bytes per answer | upstream eth_getLogs calls per query | p50 ÷ the store's |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, q := range results {
		row := func(source string, r historyResult) {
			fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.1f× |\n", q.name, source,
				pct(r.times, 50), pct(r.times, 99), maxOf(r.times), r.logs, r.bytes, r.calls, pct(r.times, 50)/pct(q.store.times, 50))
		}
		row("history store (Postgres)", q.store)
		for i, r := range q.remote {
			row(fmt.Sprintf("remotes, split by the cap, +%v per call", cfg.Latencies[i]), r)
		}
	}
	sel := results[0]
	p50 := pct(sel.store.times, 50)
	fmt.Fprintf(w, "\ngoal: selective p50 from the store under %.0f ms: %.1f ms, %s\n", goalSelectiveP50, p50, verdict(p50 < goalSelectiveP50, p50))
	for i, d := range cfg.Latencies {
		if d == 50*time.Millisecond {
			ratio := pct(sel.remote[i].times, 50) / p50
			fmt.Fprintf(w, "goal: selective at least %.0f× faster than the split remotes at +50ms: %.1f×, %s\n",
				goalSpeedup, ratio, verdict(ratio >= goalSpeedup, ratio))
		}
	}

	fmt.Fprintf(w, "\nfill: %d blocks in %s (%.0f blocks/s end to end, fetch from the fake node included; %d writers)\n",
		cfg.Blocks, fill.took.Round(time.Millisecond), float64(cfg.Blocks)/fill.took.Seconds(), fillWriters)
	fmt.Fprintf(w, "storage: %d bytes in all, %.0f bytes per block; the node's JSON (block with transactions + receipts) was %.0f bytes per block (%.2f× stored)\n\n",
		st.total, float64(st.total)/float64(cfg.Blocks), float64(fill.rawBytes)/float64(cfg.Blocks), float64(st.total)/float64(fill.rawBytes))
	fmt.Fprintln(w, "| table | partitions | rows (estimate) | bytes with indexes | of which indexes | bytes per block |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, t := range st.tables {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.0f |\n", t.name, t.parts, t.rows, t.bytes, t.indexes, float64(t.bytes)/float64(cfg.Blocks))
	}
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/headstore"
	headredis "github.com/venn-gateway/venn/headstore/redisstore"
	"github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jsonscan"
)

// `vennbench subs` holds many WebSocket subscribers on one follower replica
// and times each notification from the moment the leader published its
// block (the head event's time, read from the feed in Redis) to the moment
// the subscriber read it. It also reads the follower's RSS before and
// after the subscribers connect, and its CPU time while blocks flow.

const (
	defaultSubsClients = 10_000
	defaultSubsBlocks  = 60
	defaultSubsBlock   = 500 * time.Millisecond
	maxSubsClients     = 19_500 // each side needs a descriptor per client, and 20,000 is the usual hard limit
	subsDialers        = 32
	maxSubsProfile     = 20 * time.Second
)

const subsUsage = `vennbench subs — many subscribers on one replica: delivery latency, memory, CPU

Starts a private redis-server, the upstream (mining every -block-time), a
venn leader and one follower; connects -clients WebSocket clients to the
follower, each with one subscription (half newHeads, a quarter logs of one
contract, a quarter logs of one contract and one event), then counts
-blocks blocks.

Usage:
  vennbench subs [flags]

Flags:
`

type subsConfig struct {
	Clients   int
	Blocks    int
	BlockTime time.Duration
	Venn      string
	Profile   string
}

func parseSubsFlags(args []string, stderr io.Writer) (subsConfig, int) {
	fs := newFlags("subs", subsUsage, stderr)
	var cfg subsConfig
	fs.IntVar(&cfg.Clients, "clients", defaultSubsClients, "WebSocket clients, one subscription each")
	fs.IntVar(&cfg.Blocks, "blocks", defaultSubsBlocks, "blocks measured")
	fs.DurationVar(&cfg.BlockTime, "block-time", defaultSubsBlock, "the upstream mines a block this often")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: build ./cmd/venn)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the follower's CPU and allocation profiles over the timed blocks (at most the first 20 s) to PREFIX.{cpu,allocs} (go tool pprof)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	switch {
	case cfg.Clients < 1 || cfg.Clients > maxSubsClients:
		fmt.Fprintf(stderr, "vennbench subs: -clients must be in 1..%d\n", maxSubsClients)
		return cfg, exitUsage
	case cfg.Blocks < 1 || cfg.BlockTime <= 0:
		fmt.Fprintln(stderr, "vennbench subs: -blocks and -block-time must be positive")
		return cfg, exitUsage
	}
	return cfg, -1
}

// subscriber is one client: its subscription and what it received.
type subscriber struct {
	kind  string // "newHeads", "logs/address", "logs/address+topic"
	got   []receipt
	heads []string        // newHeads of timed blocks, in order
	lat   []time.Duration // of timed blocks
	of    []string        // the block of each of lat
}

// receipt is one notification as read: its block and when.
type receipt struct {
	hash string
	at   time.Time
}

// resolve times the notifications of blocks published once timing began:
// the bench follows the feed alongside the replica, which may deliver a
// block before the bench has read when it was published.
func (s *subscriber) resolve(p *publishLog) {
	for _, r := range s.got {
		t, ok := p.at(r.hash)
		if !ok {
			continue
		}
		if s.kind == "newHeads" {
			s.heads = append(s.heads, r.hash)
		}
		s.lat = append(s.lat, r.at.Sub(t))
		s.of = append(s.of, r.hash)
	}
	s.got = nil
}

func subsBench(ctx context.Context, cfg subsConfig, stdout, stderr io.Writer) error {
	bc, err := startBenchCluster(ctx, clusterOpts{name: "subs", venn: cfg.Venn, followers: []string{"f1"},
		extra: profileExtra(cfg.Profile), upstreamArgs: []string{"-block-time", cfg.BlockTime.String()}}, stderr)
	if err != nil {
		return err
	}
	defer bc.stop()
	rs, f := bc.rs, bc.followers[0]

	// Publish times, by block hash, from the feed itself.
	published := newPublishLog()
	fctx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	feedDone := make(chan error, 1)
	go func() { feedDone <- published.follow(fctx, rs) }()

	env := machineInfo()
	loadBefore := loadAvg()
	rssIdle, err := rssOf(f.proc.Pid())
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s; connecting %d subscribers to the follower\n", env, cfg.Clients)
	wsURL := "ws" + strings.TrimPrefix(f.url, "http")
	subs := make([]*subscriber, cfg.Clients)
	conns := make([]*rawWS, cfg.Clients)
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
	}
	defer closeAll()
	// Each subscriber reads from the moment it is subscribed, so that no
	// notification waits in a socket for its reader to start; only blocks
	// published once every subscriber is in are timed.
	var rg sync.WaitGroup
	var readErrs atomic.Int64
	var reading atomic.Bool
	reading.Store(true)
	stopReading := func() {
		reading.Store(false)
		closeAll()
		rg.Wait()
	}
	defer stopReading()
	contracts, topics := fakenode.Contracts(), fakenode.Topic0s()
	var g errgroup.Group
	g.SetLimit(subsDialers)
	for i := range cfg.Clients {
		g.Go(func() error {
			s := &subscriber{}
			var params string
			switch i % 4 {
			case 0, 2:
				s.kind, params = "newHeads", `["newHeads"]`
			case 1:
				s.kind, params = "logs/address", `["logs",{"address":"`+contracts[i%len(contracts)]+`"}]`
			case 3:
				s.kind, params = "logs/address+topic", `["logs",{"address":["`+strings.Join(contracts, `","`)+
					`"],"topics":["`+topics[(i/4)%len(topics)]+`"]}]`
			}
			c, err := subscribeWS(ctx, wsURL, params)
			if err != nil {
				return fmt.Errorf("subscriber %d: %w", i, err)
			}
			subs[i], conns[i] = s, c
			rg.Go(func() {
				if err := readNotes(c, s); err != nil && reading.Load() {
					readErrs.Add(1)
				}
			})
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	rssSubscribed, err := rssOf(f.proc.Pid())
	if err != nil {
		return err
	}

	// Time the next blocks, then stop.
	start := published.startTiming()
	userBefore, sysBefore, err := cpuTimes(f.proc.Pid())
	if err != nil {
		return err
	}
	mc := &http.Client{Timeout: 10 * time.Second}
	mBefore, err := scrape(ctx, mc, f.metrics)
	if err != nil {
		return err
	}
	wall := time.Now()
	ownBefore := ownCPU()
	// The metrics listener ends a request after 30 s.
	prof := startProfile(ctx, strings.TrimSuffix(f.metrics, "/metrics")+"/admin/debug/pprof/", cfg.Profile,
		min(time.Duration(cfg.Blocks)*cfg.BlockTime, maxSubsProfile))
	deadline := time.After(time.Duration(cfg.Blocks+20) * cfg.BlockTime * 4)
	for published.count() < start+cfg.Blocks {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("only %d of %d blocks published in time", published.count()-start, cfg.Blocks)
		case err := <-feedDone:
			return fmt.Errorf("following the feed: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second) // the last block's notifications
	elapsed := time.Since(wall)
	userAfter, sysAfter, err := cpuTimes(f.proc.Pid())
	if err != nil {
		return err
	}
	rssEnd, err := rssOf(f.proc.Pid())
	if err != nil {
		return err
	}
	mAfter, err := scrape(ctx, mc, f.metrics)
	if err != nil {
		return err
	}
	stopReading()
	selfCPU := ownCPU() - ownBefore
	if err := prof(); err != nil {
		return err
	}
	for _, s := range subs {
		s.resolve(published)
	}
	if err := bc.exited(); err != nil {
		return err
	}
	writeSubs(stdout, fmt.Sprintf("%s; load average %s before, %s after", env, loadBefore, loadAvg()), cfg, subs,
		subsFigures{rssIdle: rssIdle, rssSubscribed: rssSubscribed, rssEnd: rssEnd, user: userAfter - userBefore, sys: sysAfter - sysBefore,
			elapsed: elapsed, readErrs: readErrs.Load(), clients: selfCPU,
			dispatch: mAfter.histogram(dispatchMetric).since(mBefore.histogram(dispatchMetric))})
	return nil
}

// dispatchMetric times the follower's fan-out of a window change.
const dispatchMetric = "venn_subscription_dispatch_seconds"

// subscribeWS dials url and subscribes; it returns once the reply is in.
func subscribeWS(ctx context.Context, url, params string) (*rawWS, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := dialRawWS(dctx, url)
	if err != nil {
		return nil, err
	}
	if err := c.writeText([]byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":` + params + `}`)); err != nil {
		c.close()
		return nil, err
	}
	data, err := c.read()
	if err != nil {
		c.close()
		return nil, err
	}
	if res := jsonscan.Member(data, "result"); len(res) == 0 || res[0] != '"' {
		c.close()
		return nil, fmt.Errorf("subscribe: %s", data)
	}
	return c, nil
}

// readNotes reads s's notifications until its connection is closed,
// timing each against its block's publish time.
func readNotes(c *rawWS, s *subscriber) error {
	for {
		data, err := c.read()
		if err != nil {
			return err
		}
		at := time.Now()
		res := jsonscan.Member(jsonscan.Member(data, "params"), "result")
		key := "blockHash"
		if s.kind == "newHeads" {
			key = "hash"
		}
		raw := jsonscan.Member(res, key)
		if len(raw) < 2 {
			continue
		}
		hash := string(raw[1 : len(raw)-1])
		s.got = append(s.got, receipt{hash, at})
	}
}

// publishLog is when the leader published each block, by hash, for the
// blocks published since startTiming.
type publishLog struct {
	mu     sync.RWMutex
	times  map[string]time.Time
	n      int
	timing bool
}

// startTiming times the blocks published from now on; it returns how many
// were published before.
func (p *publishLog) startTiming() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timing = true
	return p.n
}

func newPublishLog() *publishLog { return &publishLog{times: map[string]time.Time{}} }

func (p *publishLog) follow(ctx context.Context, rs *cluster.Redis) error {
	store := headredis.New(rs.Client, clusterChain, headWindow)
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return err
	}
	err = store.Follow(ctx, snap.Gen, snap.Seq, func(ev *headstore.Event) error {
		t := time.Unix(0, ev.Time)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, b := range ev.Added {
			if p.timing {
				p.times[b.Hash] = t
			}
			p.n++
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (p *publishLog) at(hash string) (time.Time, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	t, ok := p.times[hash]
	return t, ok
}

func (p *publishLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

type subsFigures struct {
	rssIdle, rssSubscribed, rssEnd int64
	user, sys, elapsed, clients    time.Duration
	readErrs                       int64
	dispatch                       histogram // the follower's, over the timed blocks
}

func writeSubs(w io.Writer, env string, cfg subsConfig, subs []*subscriber, fig subsFigures) {
	var all []time.Duration
	kinds := map[string][]time.Duration{}
	blocks := map[string][]time.Duration{}
	var notes, dupes, gaps int
	for _, s := range subs {
		all = append(all, s.lat...)
		for i, h := range s.of {
			blocks[h] = append(blocks[h], s.lat[i])
		}
		kinds[s.kind] = append(kinds[s.kind], s.lat...)
		notes += len(s.lat)
		seen := map[string]bool{}
		for _, h := range s.heads {
			if seen[h] {
				dupes++
			}
			seen[h] = true
		}
		if s.kind == "newHeads" && len(s.heads) < cfg.Blocks {
			gaps++
		}
	}
	q := func(d []time.Duration, p float64) string {
		if len(d) == 0 {
			return "-"
		}
		slices.Sort(d)
		return fmt.Sprintf("%.1f ms", float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds())/1000)
	}
	fmt.Fprintf(w, "# vennbench subs\n%s\n\n", env)
	fmt.Fprintf(w, "%d subscribers on one follower, %d blocks every %v; %d notifications read (%d read errors)\n\n",
		len(subs), cfg.Blocks, cfg.BlockTime, notes, fig.readErrs)
	fmt.Fprintf(w, "| subscription | notifications | p50 | p99 | max |\n|---|---|---|---|---|\n")
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range append(names, "all") {
		d := all
		if k != "all" {
			d = kinds[k]
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", k, len(d), q(d, .5), q(d, .99), q(d, 1))
	}
	var p99s []time.Duration
	for _, d := range blocks {
		slices.Sort(d)
		p99s = append(p99s, d[min(len(d)-1, int(.99*float64(len(d))))])
	}
	fmt.Fprintf(w, "\nthe %d blocks' own p99: lowest %s, median %s, highest %s\n", len(p99s), q(p99s, 0), q(p99s, .5), q(p99s, 1))
	fmt.Fprintf(w, "the follower's dispatch of a block (queueing, and every write handed to the kernel): %.0f blocks, mean %.1f ms, p99 %.1f ms\n",
		fig.dispatch.count, 1000*fig.dispatch.mean(), 1000*fig.dispatch.quantile(.99))
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "\nfollower RSS: %.1f MiB idle, %.1f MiB with the subscribers, %.1f MiB at the end: %.1f KiB per subscriber\n",
		mib(fig.rssIdle), mib(fig.rssSubscribed), mib(fig.rssEnd),
		float64(max(fig.rssSubscribed, fig.rssEnd)-fig.rssIdle)/1024/float64(len(subs)))
	cpu := fig.user + fig.sys
	perNote := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(notes, 1)) }
	fmt.Fprintf(w, "follower CPU: %v over %v (%.0f%% of one core): user %v, system %v\n", cpu.Round(time.Millisecond),
		fig.elapsed.Round(time.Millisecond), 100*cpu.Seconds()/fig.elapsed.Seconds(),
		fig.user.Round(time.Millisecond), fig.sys.Round(time.Millisecond))
	fmt.Fprintf(w, "subscribers' CPU (this process): %v, %.1f µs per notification; the follower's: %.1f µs per notification (user %.1f, system %.1f)\n",
		fig.clients.Round(time.Millisecond), perNote(fig.clients), perNote(cpu), perNote(fig.user), perNote(fig.sys))
	fmt.Fprintf(w, "newHeads subscribers with a head twice: %d; with fewer than %d heads: %d\n", dupes, cfg.Blocks, gaps)
}

// ownCPU is this process's user and system CPU time so far.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

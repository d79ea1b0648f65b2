package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// `vennbench propagation` times a new block's way through the cluster,
// from outside: the upstream mines it at t0 (its wall clock, read just
// before Mine), and a goroutine per replica polls eth_blockNumber until
// that replica serves it. The upstream also notes when the leader first
// asks for the block and for its receipts, which splits the time into
// detection, fetch, and publish-to-serve.

// Defaults and bounds of the propagation bench's flags.
const (
	defaultPropBlocks    = 200
	defaultPropSkip      = 5
	defaultPropFollowers = 2
	defaultPropPoll      = 200 * time.Microsecond
	defaultPropGap       = 250 * time.Millisecond
	defaultPropTimeout   = 10 * time.Second
	maxPropBlocks        = 100_000
	maxPropFollowers     = 8
)

const propagationUsage = `vennbench propagation — time from a new block to every replica serving it

Starts a private redis-server, the upstream (which mines only on request),
a venn leader and -followers followers; then mines -blocks blocks one at a
time (-gap apart, jittered) and polls every replica's eth_blockNumber every
-poll until it serves the new block.

Usage:
  vennbench propagation [flags]

Flags:
`

// propConfig is the parsed command line of a propagation run.
type propConfig struct {
	Blocks    int
	Skip      int // blocks mined first and not counted
	Followers int
	Poll      time.Duration
	Gap       time.Duration
	Timeout   time.Duration // for one block to reach every replica
	Venn      string
}

func parsePropagationFlags(args []string, stderr io.Writer) (propConfig, int) {
	fs := newFlags("propagation", propagationUsage, stderr)
	var cfg propConfig
	fs.IntVar(&cfg.Blocks, "blocks", defaultPropBlocks, "blocks measured")
	fs.IntVar(&cfg.Skip, "skip", defaultPropSkip, "blocks mined first, not measured (warm-up)")
	fs.IntVar(&cfg.Followers, "followers", defaultPropFollowers, "followers besides the leader")
	fs.DurationVar(&cfg.Poll, "poll", defaultPropPoll, "pause between one replica's eth_blockNumber polls")
	fs.DurationVar(&cfg.Gap, "gap", defaultPropGap, "mean pause between blocks (uniform in [gap/2, 3gap/2])")
	fs.DurationVar(&cfg.Timeout, "timeout", defaultPropTimeout, "longest wait for one block to reach every replica")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	switch {
	case cfg.Blocks < 1 || cfg.Blocks > maxPropBlocks:
		fmt.Fprintf(stderr, "vennbench propagation: -blocks must be in [1, %d]\n", maxPropBlocks)
		return cfg, exitUsage
	case cfg.Skip < 0 || cfg.Skip > maxPropBlocks:
		fmt.Fprintf(stderr, "vennbench propagation: -skip must be in [0, %d]\n", maxPropBlocks)
		return cfg, exitUsage
	case cfg.Followers < 1 || cfg.Followers > maxPropFollowers:
		fmt.Fprintf(stderr, "vennbench propagation: -followers must be in [1, %d]\n", maxPropFollowers)
		return cfg, exitUsage
	case cfg.Poll < 0 || cfg.Poll > time.Second:
		fmt.Fprintln(stderr, "vennbench propagation: -poll must be in [0, 1s]")
		return cfg, exitUsage
	case cfg.Gap < 0 || cfg.Gap > time.Minute:
		fmt.Fprintln(stderr, "vennbench propagation: -gap must be in [0, 1m]")
		return cfg, exitUsage
	case cfg.Timeout <= 0 || cfg.Timeout > maxDuration:
		fmt.Fprintf(stderr, "vennbench propagation: -timeout must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	}
	return cfg, -1
}

// propagationBench runs the propagation bench and prints the report on
// stdout.
func propagationBench(ctx context.Context, cfg propConfig, stdout, stderr io.Writer) error {
	var ids []string
	for i := range cfg.Followers {
		ids = append(ids, "f"+strconv.Itoa(i+1))
	}
	bc, err := startBenchCluster(ctx, clusterOpts{name: "propagation", venn: cfg.Venn, followers: ids,
		upstreamArgs: []string{"-control"}}, stderr)
	if err != nil {
		return err
	}
	defer bc.stop()
	l, rs, up, upURL := bc.l, bc.rs, bc.up, bc.upURL
	replicas := bc.replicas()

	pctx, stopPolling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	pollers := make([]*poller, len(replicas))
	for i, r := range replicas {
		p := newPoller(r, cfg.Poll)
		pollers[i] = p
		wg.Go(func() { p.run(pctx) })
	}
	defer func() {
		stopPolling()
		wg.Wait()
		for _, p := range pollers {
			p.client.CloseIdleConnections()
		}
	}()

	env := machineInfo()
	loadBefore := loadAvg()
	fmt.Fprintf(stderr, "%s; %d blocks (+%d warm-up), leader + %d followers, poll every %v, ~%v between blocks\n",
		env, cfg.Blocks, cfg.Skip, cfg.Followers, cfg.Poll, cfg.Gap)

	pr := &propRun{cfg: cfg, l: l, upURL: upURL, pollers: pollers}
	if err := pr.settle(ctx, up); err != nil {
		return err
	}
	var before []metrics
	var blocks []propBlock
	for i := range cfg.Skip + cfg.Blocks {
		if i == cfg.Skip {
			if before, err = scrapeAll(ctx, l, replicas); err != nil {
				return err
			}
		}
		b, err := pr.block(ctx)
		if err != nil {
			return err
		}
		if i >= cfg.Skip {
			blocks = append(blocks, b)
		}
		if n := i + 1 - cfg.Skip; n > 0 && n%50 == 0 {
			fmt.Fprintf(stderr, "%d/%d blocks; last: leader %s ms, last follower %s ms\n",
				n, cfg.Blocks, ms(b.serve[0].Seconds()), ms(slices.Max(b.serve[1:]).Seconds()))
		}
		if err := pause(ctx, cfg.Gap); err != nil {
			return err
		}
	}
	after, err := scrapeAll(ctx, l, replicas)
	if err != nil {
		return err
	}
	if err := checkLeader(ctx, rs, replicas...); err != nil {
		return err
	}
	if err := bc.exited(); err != nil {
		return err
	}
	writePropagation(stdout, fmt.Sprintf("%s; load average %s before, %s after", env, loadBefore, loadAvg()),
		cfg, replicas, blocks, before, after)
	return nil
}

func procsOf(rs []*replica) []*child {
	var out []*child
	for _, r := range rs {
		out = append(out, r.proc)
	}
	return out
}

func scrapeAll(ctx context.Context, l *loader, rs []*replica) ([]metrics, error) {
	out := make([]metrics, len(rs))
	for i, r := range rs {
		m, err := scrape(ctx, l.statsClient, r.metrics)
		if err != nil {
			return nil, fmt.Errorf("venn %s: %w", r.id, err)
		}
		out[i] = m
	}
	return out, nil
}

// pause waits about gap, jittered so that blocks do not fall in step with
// the replicas' own timers (health polls, lease renewals).
func pause(ctx context.Context, gap time.Duration) error {
	if gap <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(gap/2 + rand.N(gap+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// propRun is one propagation run's state.
type propRun struct {
	cfg     propConfig
	l       *loader
	upURL   string
	pollers []*poller // the leader's first
	head    uint64    // the upstream's head, as last mined
}

// settle waits until every replica serves the upstream's current head, so
// that the first block starts from a still cluster.
func (pr *propRun) settle(ctx context.Context, up *child) error {
	n, err := pr.pollers[0].blockNumber(ctx, pr.upURL)
	if err != nil {
		return fmt.Errorf("upstream head: %w", err)
	}
	pr.head = n
	for _, p := range pr.pollers {
		err := waitFor(ctx, up, leaseTimeout, func() error {
			got, err := p.blockNumber(ctx, p.r.url)
			if err == nil && got < n {
				err = fmt.Errorf("serves %d, the upstream is at %d", got, n)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("venn %s: %w", p.r.id, err)
		}
	}
	return nil
}

// propBlock is what one block's way through the cluster took, each from
// the moment the upstream mined it.
type propBlock struct {
	number   uint64
	detect   time.Duration   // the leader asked the upstream for the block
	receipts time.Duration   // the leader asked for its receipts
	serve    []time.Duration // each replica served it; the leader's first
	polls    []int           // polls each replica took
	rtt      []time.Duration // each poll's round trip, all replicas
}

// block mines one block and waits for every replica to serve it.
func (pr *propRun) block(ctx context.Context) (propBlock, error) {
	want := pr.head + 1
	for _, p := range pr.pollers {
		p.want <- want // polling starts now, before the block exists
	}
	var m mined
	if err := pr.post(ctx, minePath, &m); err != nil {
		return propBlock{}, err
	}
	if m.Number != want {
		return propBlock{}, fmt.Errorf("mined block %d, expected %d", m.Number, want)
	}
	pr.head = m.Number
	t0 := time.Unix(0, m.At)
	b := propBlock{number: m.Number}
	timeout := time.NewTimer(pr.cfg.Timeout)
	defer timeout.Stop()
	for _, p := range pr.pollers {
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-timeout.C:
			return b, fmt.Errorf("block %d: venn %s does not serve it after %v", want, p.r.id, pr.cfg.Timeout)
		case res := <-p.got:
			if res.err != nil {
				return b, fmt.Errorf("block %d: venn %s: %w", want, p.r.id, res.err)
			}
			b.serve = append(b.serve, res.at.Sub(t0))
			b.polls = append(b.polls, res.polls)
			b.rtt = append(b.rtt, res.rtt...)
		}
	}
	var f fetched
	if err := pr.get(ctx, fetchedPath, &f); err != nil {
		return b, err
	}
	if f.Number != want || f.BlockAt == 0 {
		return b, fmt.Errorf("block %d: the upstream saw no fetch of it (%+v)", want, f)
	}
	b.detect = time.Unix(0, f.BlockAt).Sub(t0)
	if f.ReceiptsAt != 0 {
		b.receipts = time.Unix(0, f.ReceiptsAt).Sub(t0)
	}
	return b, nil
}

func (pr *propRun) post(ctx context.Context, path string, out any) error {
	return pr.do(ctx, http.MethodPost, path, out)
}

func (pr *propRun) get(ctx context.Context, path string, out any) error {
	return pr.do(ctx, http.MethodGet, path, out)
}

func (pr *propRun) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(pr.upURL, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	resp, err := pr.l.statsClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReplyBytes)).Decode(out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// poller polls one replica's eth_blockNumber on a connection of its own,
// from a goroutine of its own, so no replica's answer waits on another's.
type poller struct {
	r      *replica
	every  time.Duration
	client *http.Client
	want   chan uint64     // the block to wait for
	got    chan pollResult // capacity 1: one result per want
	body   []byte
	reply  bytes.Buffer
	seq    uint64
}

type pollResult struct {
	at    time.Time // midpoint of the first poll that saw the block
	polls int
	rtt   []time.Duration
	err   error
}

func newPoller(r *replica, every time.Duration) *poller {
	return &poller{
		r:     r,
		every: every,
		client: &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true},
			Timeout:   requestTimeout,
		},
		want: make(chan uint64),
		got:  make(chan pollResult, 1),
	}
}

// run answers each want with a pollResult until ctx ends.
func (p *poller) run(ctx context.Context) {
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-p.want:
			p.got <- p.await(ctx, n, timer)
		}
	}
}

// await polls until the replica serves block n. The block counts as
// served at the midpoint of the first poll that returned it: the replica
// began serving it between the previous poll's answer and this one's, so
// the error is at most a poll interval plus a round trip.
func (p *poller) await(ctx context.Context, n uint64, timer *time.Timer) pollResult {
	var res pollResult
	for {
		t1 := time.Now()
		got, err := p.blockNumber(ctx, p.r.url)
		t2 := time.Now()
		res.polls++
		res.rtt = append(res.rtt, t2.Sub(t1))
		if err != nil {
			res.err = err
			return res
		}
		if got >= n {
			res.at = t1.Add(t2.Sub(t1) / 2)
			return res
		}
		if p.every > 0 {
			timer.Reset(p.every)
			select {
			case <-ctx.Done():
				res.err = ctx.Err()
				return res
			case <-timer.C:
			}
		}
	}
}

// blockNumber asks url for eth_blockNumber. Only the poller's goroutine
// (or the bench before the pollers are busy) calls it.
func (p *poller) blockNumber(ctx context.Context, url string) (uint64, error) {
	p.seq++
	p.body = blockNumberCall.request(p.body[:0], p.seq)
	var n uint64
	check := func(result []byte) error {
		if !isQuantity(result) {
			return fmt.Errorf("result is not a quantity: %.200s", result)
		}
		v, err := evm.ParseQuantity(string(result[1 : len(result)-1]))
		n = v
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(p.body))
	if err != nil {
		return 0, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	p.reply.Reset()
	_, err = p.reply.ReadFrom(io.LimitReader(resp.Body, maxReplyBytes))
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, p.reply.Bytes())
	}
	if err := checkReplyOf(p.reply.Bytes(), p.seq, check); err != nil {
		return 0, err
	}
	return n, nil
}

// writePropagation prints the run's report.
func writePropagation(w io.Writer, env string, cfg propConfig, replicas []*replica, blocks []propBlock, before, after []metrics) {
	fmt.Fprintf(w, "Machine: %s\n\n", env)
	fmt.Fprintf(w, "%d blocks mined one at a time on the upstream (after %d unmeasured), %v apart on average; leader + %d followers; every replica polled for eth_blockNumber every %v from a goroutine and connection of its own.\n\n",
		len(blocks), cfg.Skip, cfg.Gap, len(replicas)-1, cfg.Poll)
	fmt.Fprintln(w, "From the upstream mining block n (t0) to:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| from t0 to | p50 ms | p99 ms | mean ms | max ms |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	row := func(name string, f func(b propBlock) time.Duration) {
		ds := make([]time.Duration, 0, len(blocks))
		for _, b := range blocks {
			ds = append(ds, f(b))
		}
		slices.Sort(ds)
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		mean := time.Duration(0)
		if len(ds) > 0 {
			mean = sum / time.Duration(len(ds))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, ms(percentile(ds, 50).Seconds()), ms(percentile(ds, 99).Seconds()),
			ms(mean.Seconds()), ms(slices.Max(append(ds, 0)).Seconds()))
	}
	lastFollower := func(b propBlock) time.Duration { return slices.Max(b.serve[1:]) }
	row("the leader asks the upstream for the block (detection: newHeads over WS, stalker wake-up)", func(b propBlock) time.Duration { return b.detect })
	row("the leader asks for its receipts", func(b propBlock) time.Duration { return b.receipts })
	row("the leader serves it", func(b propBlock) time.Duration { return b.serve[0] })
	for i, r := range replicas[1:] {
		row("follower "+r.id+" serves it", func(b propBlock) time.Duration { return b.serve[i+1] })
	}
	row("**every follower serves it (the last one)**", lastFollower)
	row("every replica serves it", func(b propBlock) time.Duration { return slices.Max(b.serve) })
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Between two points, per block:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| interval | p50 ms | p99 ms | mean ms | max ms |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	row("leader's block request → leader serves (fetch, publish, its own follow)", func(b propBlock) time.Duration { return b.serve[0] - b.detect })
	row("leader serves → last follower serves", func(b propBlock) time.Duration { return lastFollower(b) - b.serve[0] })
	fmt.Fprintln(w)

	var polls, n int
	var rtts []time.Duration
	for _, b := range blocks {
		for _, p := range b.polls {
			polls += p
			n++
		}
		rtts = append(rtts, b.rtt...)
	}
	slices.Sort(rtts)
	if n > 0 {
		fmt.Fprintf(w, "Polling: %.1f polls per replica per block, round trip p50 %s µs, p99 %s µs: a replica's serve time is known to within a poll interval plus a round trip.\n\n",
			float64(polls)/float64(n), fmt.Sprintf("%.0f", micros(percentile(rtts, 50))), fmt.Sprintf("%.0f", micros(percentile(rtts, 99))))
	}

	fmt.Fprintln(w, "venn's own histograms over the same blocks (p50/p99 interpolated within the buckets, so only as fine as they are; the mean is exact):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| metric | replica | observations | mean ms | p50 ms ≈ | p99 ms ≈ |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	hrow := func(name, id string, h histogram) {
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s |\n", name, id, h.count, ms(h.mean()), ms(h.quantile(0.5)), ms(h.quantile(0.99)))
	}
	const fetchName, propName = "venn_stalker_fetch_seconds", "venn_head_propagation_seconds"
	if len(before) == len(replicas) && len(after) == len(replicas) {
		hrow(fetchName+" (block + receipts fetch)", replicas[0].id, after[0].histogram(fetchName).since(before[0].histogram(fetchName)))
		for i, r := range replicas {
			hrow(propName+" (leader publish → replica applied)", r.id, after[i].histogram(propName).since(before[i].histogram(propName)))
		}
	}
}

package stalker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/retry"
	"github.com/venn-gateway/venn/tracing"
)

// Upstream is what the stalker fetches blocks through: the chain's
// remotes pool. CallVerified checks each remote's answer with verify and
// serves a failing one from another remote; the verdict is the served
// answer's. It hedges the call itself when hedge is above 0: when the
// remote asked is slower than its p90 and at least hedge, another remote
// that has the block gets the call too, each answer checked by verify
// (remotes.Pool.CallVerified).
type Upstream interface {
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	CallVerified(ctx context.Context, method string, params json.RawMessage,
		verify func(json.RawMessage) integrity.Verdict, hedge time.Duration) (json.RawMessage, integrity.Verdict, error)
}

// Heads is what the stalker follows the chain's head by: the pool's head
// tracking (remotes.Heads), whose tip is the highest corroborated head
// among its healthy remotes. HeadChanged fires when the tip moves, also to
// a sibling at the same height. BlockTime is the chain's, from config or
// learned from block timestamps. CheckTipChain checks at once the chain id
// of the remotes whose head is one of the blocks hashes, each out of
// rotation until it passes, and reports whether all passed
// (remotes.Heads.CheckTipChain).
type Heads interface {
	Tip() (number uint64, hash string)
	HeadChanged() <-chan struct{}
	BlockTime() time.Duration
	CheckTipChain(ctx context.Context, hashes ...string) bool
}

// HeadPacer is Heads whose head polling follows the leader's plan while
// this replica leads (remotes.Heads.SetLeading): polls when the next block
// is due, not once a block time.
type HeadPacer interface {
	SetLeading(on bool)
}

// Config is one chain's stalker settings. Its cadence is the upstream's
// block time.
type Config struct {
	Chain string
	// HeadConfig is the window and how gaps and finality are followed
	// (config.go); zero fields take the defaults.
	HeadConfig
	// Integrity checks every block and its receipts against themselves
	// (integrity.VerifyBlock, integrity.VerifyReceipts) and fetches what fails from
	// another remote. Off for chains whose data venn can't encode at all,
	// and for fake nodes whose hashes are synthetic.
	Integrity bool
	// Archive files settled blocks in the history store (archive.go).
	Archive ArchiveConfig
	// Tracer traces each block fetch and archive write, a trace of its
	// own with the remotes' sends under it; nil: off.
	Tracer *tracing.Tracer
}

// Fetch limits.
const (
	// fetchConcurrency bounds the blocks fetched at once while catching up.
	fetchConcurrency = 4
)

// Stalker is the leader's loop for one chain: it follows the head through
// the remotes, fetches each new block with its transactions and receipts,
// checks that each block's parent is the block below it, walks back to the
// common ancestor on a reorg, and publishes every change to the headstore
// under its fencing epoch. It runs only while its replica leads the chain.
type Stalker struct {
	cfg   Config
	up    Upstream
	heads Heads
	store headstore.Store
	log   *slog.Logger
	m     stalkerMetrics
	// now is the stalker's clock: it stamps published events and paces
	// the finality reads. Tests set their own.
	now func() time.Time

	// receipts fetches blocks' receipts: eth_getBlockReceipts, or one
	// eth_getTransactionReceipt per transaction where no remote has it.
	receipts *forger.Receipts
}

// New returns a chain's stalker, fetching through up and following
// heads. It does no I/O.
func New(cfg Config, up Upstream, heads Heads, store headstore.Store, log *slog.Logger, m *Metrics) *Stalker {
	// Validate refuses less; unset takes the default.
	cfg.Window, cfg.Backfill = max(cfg.Window, 0), max(cfg.Backfill, 0)
	cfg.HeadConfig = cfg.HeadConfig.WithDefaults(0)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	s := &Stalker{cfg: cfg, up: up, heads: heads, store: store, log: log.With("chain", cfg.Chain), m: m.forChain(cfg.Chain),
		now: time.Now}
	s.receipts = forger.NewReceipts(func(ctx context.Context, method string, params json.RawMessage,
		verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
		res, _, err := s.call(ctx, method, params, verify)
		return res, err
	}, s.log)
	return s
}

// leading is one leadership's state: the canonical chain as published.
type leading struct {
	epoch     uint64
	chain     []headstore.Ref // ascending, contiguous, at most Window
	safe      uint64
	finalized uint64
	// seq is the store's seq as the leader last saw it (loaded or
	// published): each publish must follow it, so that events the store
	// lost (a Redis failover that had not replicated them) are noticed
	// before the next block is written over the hole.
	seq uint64

	// loaded: chain, safe and finalized are the store's. Cleared when a
	// publish may have landed without the leader knowing.
	loaded bool
	// finalityAt is when safe and finalized were last read; finalityFailing
	// that the last read failed (its failures are logged once per run).
	finalityAt      time.Time
	finalityFailing bool

	// refused are the hashes of blocks whose reorg was refused (reorg.go),
	// newest last: a branch that reaches one is refused without walking
	// it again.
	refused []string

	// With archiving: the chain's blocks in full, and the archiver they
	// are handed to after every publish.
	full fullChain
	arch *archiver

	// ann announces new headers ahead of their blocks (announce.go); nil
	// when the store carries no headers.
	ann *announcer
}

func (l *leading) top() (headstore.Ref, bool) {
	if len(l.chain) == 0 {
		return headstore.Ref{}, false
	}
	return l.chain[len(l.chain)-1], true
}

// errDeposed: the store fenced a write; a newer leader exists.
var errDeposed = errors.New("deposed")

// Lead follows the chain until ctx ends or the store fences a write. It has
// the shape Elector.Run wants.
func (s *Stalker) Lead(ctx context.Context, epoch uint64) {
	s.log.Info("stalker following the head", "epoch", epoch)
	if p, ok := s.heads.(HeadPacer); ok {
		p.SetLeading(true)
		defer p.SetLeading(false)
	}
	l := &leading{epoch: epoch}
	if hs, ok := s.store.(headstore.HeaderStore); ok {
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		l.ann = newAnnouncer(hs, epoch, s.log)
		go func() { defer close(done); l.ann.run(actx) }()
		defer func() { cancel(); <-done }()
	}
	if s.cfg.Archive.Store != nil {
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		l.arch = s.newArchiver()
		go func() { defer close(done); l.arch.run(actx) }()
		defer func() { cancel(); <-done }()
	}
	poll := time.NewTimer(s.heads.BlockTime())
	defer poll.Stop()
	backoff := time.Duration(0)
	for {
		wake := s.heads.HeadChanged()
		err := s.step(ctx, l)
		bt := s.heads.BlockTime()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errDeposed):
			s.log.Warn("stalker stopped: a newer leader holds the chain", "epoch", epoch)
			return
		case err != nil:
			backoff = retry.Double(backoff, bt/4, 4*bt)
			s.m.errors.Inc()
			s.log.Warn("stalker", "err", err, "retry_in", backoff)
			if !retry.Sleep(ctx, backoff) {
				return
			}
			continue
		}
		backoff = 0
		poll.Reset(bt) // the tip's signal is what wakes it; this is the safety net
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		}
	}
}

// finalityInterval is how often safe and finalized are read.
func (s *Stalker) finalityInterval() time.Duration {
	if s.cfg.FinalityInterval > 0 {
		return s.cfg.FinalityInterval
	}
	return DefaultFinalityInterval(s.heads.BlockTime())
}

// step brings the published chain up to the remotes' head.
func (s *Stalker) step(ctx context.Context, l *leading) error {
	if !l.loaded {
		if err := s.load(ctx, l); err != nil {
			return err
		}
	}
	if s.now().Sub(l.finalityAt) >= s.finalityInterval() {
		s.readFinality(ctx, l)
		l.finalityAt = s.now()
		if l.arch != nil {
			// A higher finalized block may settle more of the chain.
			l.arch.offer(l.full.blocksOf(l.chain), l.finalized)
		}
	}
	target, hash := s.heads.Tip()
	if hash == "" {
		return nil // no head yet; block 0 is a head like any other
	}
	err := s.advance(ctx, l, target)
	if err == nil {
		err = s.checkTip(ctx, l, target, hash)
	}
	if err != nil && !errors.Is(err, errDeposed) && !errors.Is(err, errFetch) && !errors.Is(err, errRefused) {
		// A publish that failed on the wire may have landed: read the
		// store's chain again before going on.
		l.loaded = false
	}
	return err
}

// load reads the published chain from the store.
func (s *Stalker) load(ctx context.Context, l *leading) error {
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("load window: %w", err)
	}
	l.chain = l.chain[:0]
	for _, b := range snap.Blocks {
		l.chain = append(l.chain, headstore.Ref{Number: b.Number, Hash: b.Hash})
	}
	l.safe, l.finalized = snap.Safe, snap.Finalized
	l.seq = snap.Seq
	if l.arch != nil {
		l.full.reset(snap.Blocks)
		l.arch.offer(l.full.blocksOf(l.chain), l.finalized)
	}
	l.loaded = true
	return nil
}

// errFetch marks failures to fetch from the remotes: nothing was written.
var errFetch = errors.New("fetch")

// advance fetches and publishes blocks up to target.
func (s *Stalker) advance(ctx context.Context, l *leading, target uint64) error {
	top, ok := l.top()
	next := top.Number + 1
	switch {
	case !ok:
		// A fresh window: its last Window blocks.
		next = target - min(target, uint64(s.cfg.Window)-1)
	case target > top.Number+uint64(s.cfg.Backfill):
		// Away too long to fill the gap: a fresh window, and the feed
		// says so by a first block whose parent is not in it.
		next = target - min(target, uint64(s.cfg.Window)-1)
		s.log.Warn("head feed gap too deep to backfill; starting a fresh window",
			"published", top.Number, "head", target, "backfill", s.cfg.Backfill)
	}
	for next <= target {
		end := min(target, next+fetchConcurrency*2-1)
		if l.ann != nil {
			top, _ := l.top()
			l.ann.from(top)
		}
		blocks, err := s.fetchRange(ctx, l.ann, next, end)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if err := s.link(ctx, l, b); err != nil {
				return err
			}
		}
		top, _ := l.top()
		next = top.Number + 1
	}
	return nil
}

// link publishes b on top of the chain: as a new head when its parent is
// the top, as a reorg when it is not.
func (s *Stalker) link(ctx context.Context, l *leading, b *evm.Block) error {
	top, ok := l.top()
	if ok && b.Number <= top.Number {
		// The range was fetched before a reorg this loop already handled.
		return nil
	}
	if !ok || b.Number != top.Number+1 || b.Parent == top.Hash {
		return s.publish(ctx, l, &headstore.Event{Added: []*evm.Block{b}})
	}
	return s.reorg(ctx, l, b)
}

// checkTip re-fetches the tip when the remotes' tip at the published
// height has another hash: a sibling replaced it, which no parent link
// shows until the next block. A new leader does this at its first step,
// so that a tip replaced during the failover is not served until then.
func (s *Stalker) checkTip(ctx context.Context, l *leading, number uint64, hash string) error {
	top, ok := l.top()
	if !ok || hash == "" || top.Number != number || top.Hash == hash {
		return nil
	}
	b, err := s.fetchBlock(ctx, "eth_getBlockByHash", strconv.Quote(hash))
	if err != nil {
		return err
	}
	if b.Number != number || b.Hash != hash {
		return fmt.Errorf("%w: block %s is not the tip %d %s", errFetch, b.Hash, number, hash)
	}
	return s.reorg(ctx, l, b)
}

// reorg publishes b, whose parent is not the published block below it, with
// its branch down to the common ancestor in place of the blocks it
// replaces.
func (s *Stalker) reorg(ctx context.Context, l *leading, b *evm.Block) error {
	branch, dropped, err := s.walkBack(ctx, l, b)
	if err != nil {
		return err
	}
	if err := s.acceptReorg(ctx, l, b, branch); err != nil {
		return err
	}
	s.m.reorgs.Inc()
	s.m.reorgDepth.Observe(float64(len(dropped)))
	s.log.Warn("reorg", "depth", len(dropped), "from", dropped[0].Number,
		"new_head", b.Number, "new_hash", b.Hash)
	return s.publish(ctx, l, &headstore.Event{Dropped: dropped, Added: branch})
}

// walkBack follows b's parents by hash until one is on the published chain:
// the common ancestor. It returns the new branch above the ancestor and the
// published blocks it replaces. When the ancestor is below the window the
// whole window is dropped.
func (s *Stalker) walkBack(ctx context.Context, l *leading, b *evm.Block) ([]*evm.Block, []headstore.Ref, error) {
	branch := []*evm.Block{b}
	low := l.chain[0].Number
	for cur := b; cur.Number > low; {
		at := l.chain[cur.Number-1-low]
		if at.Hash == cur.Parent {
			break
		}
		if l.wasRefused(cur.Parent) {
			return nil, nil, fmt.Errorf("%w: block %d %s descends from a refused branch", errRefused, b.Number, b.Hash)
		}
		parent, err := s.fetchBlock(ctx, "eth_getBlockByHash", strconv.Quote(cur.Parent))
		if err != nil {
			return nil, nil, err
		}
		if parent.Number != cur.Number-1 || parent.Hash != cur.Parent {
			return nil, nil, fmt.Errorf("%w: block %s is not %d's parent", errFetch, parent.Hash, cur.Number)
		}
		branch = append(branch, parent)
		cur = parent
	}
	// branch is newest first.
	for i, j := 0, len(branch)-1; i < j; i, j = i+1, j-1 {
		branch[i], branch[j] = branch[j], branch[i]
	}
	var dropped []headstore.Ref
	for _, r := range l.chain {
		if r.Number >= branch[0].Number {
			dropped = append(dropped, r)
		}
	}
	if len(dropped) == 0 {
		dropped = append(dropped, l.chain...)
	}
	return branch, dropped, nil
}

// publish writes ev under the leader's epoch and, once it landed, moves the
// leader's chain the same way every window moves.
func (s *Stalker) publish(ctx context.Context, l *leading, ev *headstore.Event) error {
	ev.Safe, ev.Finalized = l.safe, l.finalized
	ev.Time = s.now().UnixNano()
	ev.Seq = l.seq
	if err := s.store.Publish(ctx, l.epoch, ev); err != nil {
		if errors.Is(err, headstore.ErrFenced) {
			return errDeposed
		}
		return fmt.Errorf("publish: %w", err)
	}
	l.seq = ev.Seq
	s.m.published.Add(float64(len(ev.Added)))
	s.m.head.Set(float64(ev.Head()))
	l.chain = headstore.NextChain(l.chain, ev, s.cfg.Window)
	if l.arch != nil {
		l.arch.offer(l.full.apply(ev, l.chain), l.finalized)
	}
	return nil
}

// fetchRange fetches blocks from..to, a few at once, in order; ann, when
// not nil, announces their headers as they come.
func (s *Stalker) fetchRange(ctx context.Context, ann *announcer, from, to uint64) ([]*evm.Block, error) {
	out := make([]*evm.Block, to-from+1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchConcurrency)
	for n := from; n <= to; n++ {
		g.Go(func() error {
			call := s.call
			if ann != nil {
				call = s.announcing(ann, evm.BlockRef{Kind: evm.RefNumber, Number: n})
			}
			b, err := s.fetchWith(gctx, call, "eth_getBlockByNumber", `"`+evm.Quantity(n)+`"`)
			out[n-from] = b
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// fetchBlock fetches one block with full transactions and its receipts,
// and checks that they belong together and, with Integrity, that each is
// what its hashes say.
func (s *Stalker) fetchBlock(ctx context.Context, method, ref string) (*evm.Block, error) {
	return s.fetchWith(ctx, s.call, method, ref)
}

// fetchWith is fetchBlock through call.
func (s *Stalker) fetchWith(ctx context.Context, call forger.VerdictCall, method, ref string) (*evm.Block, error) {
	start := s.now()
	ctx, sp := s.cfg.Tracer.StartRoot(ctx, spanFetch, trace.SpanKindInternal, nil)
	b, err := forger.FetchBlock(ctx, call, s.receipts, method, ref)
	if sp.IsRecording() {
		s.annotateFetch(sp, method, b, err)
	}
	sp.End()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errFetch, err)
	}
	s.m.fetch.Observe(s.now().Sub(start).Seconds())
	return b, nil
}

// Hedges of the leader's fetches: a new block's answers are hedged after
// an eighth of a block time (at least the remote's p90), within these.
const (
	minFetchHedge = 20 * time.Millisecond
	maxFetchHedge = time.Second
)

// call is a call through the remotes, checked by verify with Integrity,
// and hedged to a second remote when the first is slow: every subscriber
// waits on these calls.
func (s *Stalker) call(ctx context.Context, method string, params json.RawMessage,
	verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error) {
	if !s.cfg.Integrity {
		verify = unchecked
	}
	after := min(max(s.heads.BlockTime()/8, minFetchHedge), maxFetchHedge)
	return s.up.CallVerified(ctx, method, params, verify, after)
}

// unchecked is the verify of a chain without Integrity: every answer
// passes.
func unchecked(json.RawMessage) integrity.Verdict { return integrity.Verdict{} }

// readFinality reads the safe and finalized numbers into l; they never
// go down. A chain without them ("null") leaves them unknown (0), and a
// read that fails leaves its number as it was. Each failed read is
// counted; a run of them is logged once, at its start, and its end once:
// a chain whose remotes refuse the tags refuses them at every read.
func (s *Stalker) readFinality(ctx context.Context, l *leading) {
	safe, errSafe := s.readTag(ctx, "safe")
	final, errFinal := s.readTag(ctx, "finalized")
	l.safe, l.finalized = max(l.safe, safe), max(l.finalized, final)
	if ctx.Err() != nil {
		return // stopping: not the remotes' failure
	}
	for _, err := range []error{errSafe, errFinal} {
		if err != nil {
			s.m.finalityErrors.Inc()
		}
	}
	switch err := errors.Join(errSafe, errFinal); {
	case err != nil && !l.finalityFailing:
		l.finalityFailing = true
		s.log.Warn("stalker: reading safe and finalized failed; keeping the last known",
			"err", err, "safe", l.safe, "finalized", l.finalized)
	case err == nil && l.finalityFailing:
		l.finalityFailing = false
		s.log.Info("stalker: reading safe and finalized again", "safe", l.safe, "finalized", l.finalized)
	}
}

// readTag reads the number of the block tag names: 0 when the chain has
// no such block.
func (s *Stalker) readTag(ctx context.Context, tag string) (uint64, error) {
	res, err := s.up.Call(ctx, "eth_getBlockByNumber", json.RawMessage(`["`+tag+`",false]`))
	if err != nil {
		return 0, fmt.Errorf("%s block: %w", tag, err)
	}
	if string(res) == "null" {
		return 0, nil
	}
	var h struct {
		Number string `json:"number"`
	}
	if err := json.Unmarshal(res, &h); err != nil {
		return 0, fmt.Errorf("%s block: %w", tag, err)
	}
	n, err := evm.ParseQuantity(h.Number)
	if err != nil {
		return 0, fmt.Errorf("%s block number %q: %w", tag, h.Number, err)
	}
	return n, nil
}

// Metrics are the stalkers' metrics.
type Metrics struct {
	reorgs     *prometheus.CounterVec
	refused    *prometheus.CounterVec
	reorgDepth *prometheus.HistogramVec
	fetch      *prometheus.HistogramVec
	published  *prometheus.CounterVec
	head       *prometheus.GaugeVec
	errors     *prometheus.CounterVec
	// finalityErrors counts the safe and finalized reads that failed.
	finalityErrors *prometheus.CounterVec
}

// NewMetrics registers the stalkers' metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reorgs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "reorgs_total",
			Help: "Reorgs the leader's stalker found, per chain."}, []string{"chain"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "reorgs_refused_total",
			Help: "Reorgs the leader's stalker refused, by reason: finalized (it reached at or below the finalized block), " +
				"no_ancestor (its branch links to nothing in the window and the remote that reported it failed its chain check)."},
			[]string{"chain", "reason"}),
		reorgDepth: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "reorg_depth",
			Help: "Blocks dropped per reorg.", Buckets: []float64{1, 2, 3, 5, 8, 16, 32, 64, 128}}, []string{"chain"}),
		fetch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "stalker_fetch_seconds",
			Help:    "Time to fetch one block with its transactions and receipts.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"chain"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "stalker_blocks_total",
			Help: "Blocks the leader's stalker published."}, []string{"chain"}),
		head: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "stalker_head",
			Help: "Head the leader's stalker last published."}, []string{"chain"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "stalker_errors_total",
			Help: "Stalker rounds that failed (fetch or publish) and were retried."}, []string{"chain"}),
		finalityErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn",
			Name: "stalker_finality_errors_total",
			Help: "Reads of the safe or finalized block that failed; the last known number was kept."},
			[]string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.reorgs, m.refused, m.reorgDepth, m.fetch, m.published, m.head, m.errors, m.finalityErrors)
	}
	return m
}

// DropChain deletes chain's series, once its stalker has stopped for good
// (a reload removed the chain): a stalker of the chain built later
// resolves them afresh.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	for _, v := range []*prometheus.MetricVec{m.reorgs.MetricVec, m.refused.MetricVec, m.reorgDepth.MetricVec, m.fetch.MetricVec,
		m.published.MetricVec, m.head.MetricVec, m.errors.MetricVec, m.finalityErrors.MetricVec} {
		v.DeletePartialMatch(l)
	}
}

type stalkerMetrics struct {
	reorgs     prometheus.Counter
	refused    *prometheus.CounterVec // reason; curried with the chain
	reorgDepth prometheus.Observer
	fetch      prometheus.Observer
	published  prometheus.Counter
	head       prometheus.Gauge
	errors     prometheus.Counter

	finalityErrors prometheus.Counter
}

func (m *Metrics) forChain(chain string) stalkerMetrics {
	return stalkerMetrics{
		reorgs: m.reorgs.WithLabelValues(chain), refused: m.refused.MustCurryWith(prometheus.Labels{"chain": chain}),
		reorgDepth: m.reorgDepth.WithLabelValues(chain),
		fetch:      m.fetch.WithLabelValues(chain), published: m.published.WithLabelValues(chain),
		head: m.head.WithLabelValues(chain), errors: m.errors.WithLabelValues(chain),
		finalityErrors: m.finalityErrors.WithLabelValues(chain),
	}
}

// annotateFetch puts a block fetch's outcome on its span: the block, never
// its content; on failure only that it failed (the error's text is the
// logs').
func (s *Stalker) annotateFetch(sp trace.Span, method string, b *evm.Block, err error) {
	sp.SetAttributes(tracing.KeyChain.String(s.cfg.Chain), tracing.KeyFetch.String(method))
	if err != nil {
		sp.SetStatus(codes.Error, "fetch failed")
		return
	}
	sp.SetAttributes(tracing.KeyBlock.Int64(int64(b.Number)))
}

// announcing is s.call for a fetch whose block's header a announces: the
// block's answer is offered before its own check runs (with Integrity),
// or once it is in (without).
func (s *Stalker) announcing(a *announcer, want evm.BlockRef) forger.VerdictCall {
	return func(ctx context.Context, method string, params json.RawMessage,
		verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error) {
		if method != "eth_getBlockByNumber" && method != "eth_getBlockByHash" {
			return s.call(ctx, method, params, verify)
		}
		if !s.cfg.Integrity {
			res, v, err := s.call(ctx, method, params, verify)
			if err == nil {
				if h, ok := headstore.HeaderOf(res); ok {
					a.offer(h)
				}
			}
			return res, v, err
		}
		check := verify
		verify = func(res json.RawMessage) integrity.Verdict {
			if h, ok := headstore.HeaderOf(res); ok && headerGood(h, want) {
				a.offer(h)
			}
			return check(res)
		}
		return s.call(ctx, method, params, verify)
	}
}

// Package router is a chain's front door: it parses each call once
// (evm.ParseCall) and decides which part of venn answers it; every part
// takes the parsed call and none reads the params again. venn itself answers what it knows from config
// (eth_chainId); subscriptions go to the subcenter; the head window answers
// near-head blocks, receipts and logs; the history store answers settled
// blocks, receipts and logs (history.go: parts of a log range it lacks come
// from the remotes, and settled blocks fetched from them are written
// through, writethrough.go); the forger builds what no remote has
// (eth_getBlockReceipts per transaction) or what a held block answers
// (headers); everything else goes to the remotes pool, with latest, safe
// and finalized pinned to the cluster's numbers. A call with a floor
// (jrpc.MinHead, minhead.go) is answered by the head window only when its
// head reaches it, and reaches the remotes with it resolved to a number.
//
// The remotes are an Upstream, which app wires: parsed calls one way in,
// and the remotes' heads the window is judged by. The router must not
// import the remotes' pool, nor send them a wire request of its own.
package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/tracing"
)

// Config is one chain's routing settings.
type Config struct {
	Chain   string
	ChainID uint64
	// MaxLag is how far the head window may trail the remotes' head and
	// still answer: beyond it the window is stale (its leader is stuck)
	// and calls go to the remotes.
	MaxLag uint64
	// Subscriptions serves eth_subscribe and eth_unsubscribe; nil answers
	// them as a node without notifications does.
	Subscriptions Subscriptions
	// Filters serves the filter methods (eth_newFilter,
	// eth_getFilterChanges, ...) from state every replica shares; nil:
	// they go to the remotes, each filter pinned to the remote that made
	// it.
	Filters Filters
	// History is the chain's history store; nil: none. Calls the head
	// window could not answer are read from it before the remotes, and
	// settled blocks clients fetched from the remotes are written through
	// to it (see Run).
	History History
	// Settled is the cluster's settled line: the highest block number no
	// reorg will replace; ok is false while it is unknown (nil: never
	// known). Only numbers at or below it are written through to History,
	// and, while it is known, read from it; while it is not, numbers the
	// store holds whole are read from it unless a known head says
	// otherwise (see readable).
	Settled func() (n uint64, ok bool)
	// WriteThroughQueue bounds the blocks waiting to be written through;
	// 0: DefaultWriteThroughQueue.
	WriteThroughQueue int
	// Confirm asks the remotes, each a different one, for block n's hash:
	// how many agree with hash and how many name another (the pool's
	// Heads().ConfirmHash). The write-through stores a block that links to
	// nothing the window or the store holds only when two agree; nil:
	// such a block is not stored.
	Confirm func(ctx context.Context, n uint64, hash string) (agree, disagree int)
	// Cache is the chain's response cache; nil: none.
	Cache *cache.Cache
	// Logger logs the write-through and the forger; nil: discarded.
	Logger *slog.Logger
	// Tracer traces the head, history and forger lookups of traced calls,
	// and names each call's source on its span (trace.go); nil: off.
	Tracer *tracing.Tracer
	// LogLimits cap clients' eth_getLogs (loglimits.go); zero caps take
	// their defaults.
	LogLimits LogLimits
	// Static answers methods (and exact params) from config, before any
	// other source (static.go).
	Static []StaticAnswer
}

// Subscriptions is the chain's subcenter.
type Subscriptions interface {
	Subscribe(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	Unsubscribe(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// Filters is the chain's polled filters (subcenter.Filters). via is the
// router itself: what the head window lacks for a poll (logs below it, an
// orphan it never saw) is asked through the router's sources and limits.
type Filters interface {
	ServeFilter(ctx context.Context, via jrpc.Handler, req *jrpc.Request) (json.RawMessage, error)
}

// isFilterMethod reports the methods Config.Filters serves.
func isFilterMethod(method string) bool {
	switch method {
	case "eth_newFilter", "eth_newBlockFilter", "eth_newPendingTransactionFilter",
		"eth_getFilterChanges", "eth_getFilterLogs", "eth_uninstallFilter":
		return true
	}
	return false
}

// Head is the chain's head window as the router uses it.
type Head interface {
	// Answer answers a call from the window; ok is false when it cannot.
	Answer(c evm.Call) (res json.RawMessage, ok bool)
	// Tags are the cluster's latest, safe and finalized numbers; ok is
	// false while the window is empty.
	Tags() (headstore.Tags, bool)
	// Latest is the head's number; ok is false when the window must not
	// answer (empty, or its feed is lost).
	Latest() (uint64, bool)
	// Monotonic returns the highest of n and every head answered before,
	// recording n, a corroborated head; a floor far above ceiling, the
	// cluster's corroborated head (0: unknown), heals down to it.
	Monotonic(n, ceiling uint64) uint64
}

// Upstream is the chain's remotes as the router uses them, wired by app:
// calls through the pool (or its integrity-checking client), and what the
// pool knows of the remotes' heads, which the head window is judged by.
type Upstream interface {
	forger.Calls
	Tip
}

// UpstreamOf is calls and tip as one Upstream: app wires a chain's pool
// (or its client that checks blocks and receipts) and the pool's heads so.
func UpstreamOf(calls forger.Calls, tip Tip) Upstream { return upstream{calls, tip} }

type upstream struct {
	forger.Calls
	Tip
}

// Tip is what the router needs of the remotes' heads (remotes.Heads): the
// best head among those in rotation, to tell a stale window and a number
// no remote could answer for; the hash the chain's tip says for a recent
// block, and whether a remote in rotation still reports another, to tell
// a window that holds an orphan; when one of them last reported its head,
// and the chain's block time, to tell a window that is old.
type Tip interface {
	HealthyHead() uint64
	HashAt(n uint64) (hash string, ok bool)
	Reports(n uint64, hash string) bool
	HeardWithin(now time.Time, d time.Duration) bool
	BlockTime() time.Duration
}

// headRefOf is the window's head as freshness reads it, without a lock
// (headstore.Window).
type headRefOf interface {
	HeadRef() (n uint64, hash string, time uint64, ok bool)
}

// canonicalOf is the head window's view of the chain the cluster follows,
// which the write-through checks blocks against.
type canonicalOf interface {
	CanonicalHash(n uint64) (hash string, ok bool)
}

// canonicalNumberOf is the head window's canonical blocks by hash, which
// the response cache keys an EIP-1898 requireCanonical hash by.
type canonicalNumberOf interface {
	CanonicalNumber(hash string) (n uint64, ok bool)
}

// storedLinks is the history store's check that a block links by hash to
// its stored neighbours (blockstore.Chain.Links).
type storedLinks interface {
	Links(ctx context.Context, n uint64, hash, parent string) (bool, error)
}

// Router routes one chain's calls. It implements jrpc.Handler.
type Router struct {
	cfg     Config
	chainID json.RawMessage
	head    Head // nil: no head window
	up      Upstream
	headRef headRefOf // the window's head; nil when it doesn't say
	now     func() time.Time
	history History                     // nil: no history store
	cache   atomic.Pointer[cache.Cache] // nil: no response cache; a reload swaps it (SetCache)
	// canonical is the head window's canonical hash of a number; nil
	// without a window that says.
	canonical func(n uint64) (string, bool)
	// canonicalNumber is the head window's number of a canonical block's
	// hash; nil without a window that says.
	canonicalNumber func(hash string) (uint64, bool)
	hashes          settledHashes // settled blocks' hashes from header lookups
	roots           stateRoots    // blocks' state roots, for the cache's proof check
	forge           *forger.Forger
	wt              *writeThrough // nil without history
	log             *slog.Logger

	// stale is why the window may not answer now (a staleness; fresh
	// when it may): logged once when it changes.
	stale atomic.Uint32
	// maxLag is cfg.MaxLag, which a reload may change (SetMaxLag).
	maxLag atomic.Uint64
	// logLimits is cfg.LogLimits defaulted, which a reload may change
	// (SetLogLimits).
	logLimits atomic.Pointer[LogLimits]
	// static is the chain's static answers; nil: none (static.go).
	static atomic.Pointer[staticTable]

	local, fromHead, fromStore, fromCache, forged, forwarded origin
}

var _ jrpc.Handler = (*Router)(nil)

// New builds a chain's router in front of its remotes; head may be nil.
func New(cfg Config, head Head, up Upstream, m *Metrics) *Router {
	if m == nil {
		m = NewMetrics(nil)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("chain", cfg.Chain)
	headRef, _ := head.(headRefOf)
	rt := &Router{
		up:        up,
		headRef:   headRef,
		now:       time.Now,
		cfg:       cfg,
		chainID:   json.RawMessage(`"` + evm.Quantity(cfg.ChainID) + `"`),
		head:      head,
		history:   cfg.History,
		forge:     forger.New(up, log),
		log:       log,
		local:     newSource(m, cfg, sourceLocal),
		fromHead:  newSource(m, cfg, sourceHead),
		fromStore: newSource(m, cfg, sourceHistory),
		fromCache: newSource(m, cfg, sourceCache),
		forged:    newSource(m, cfg, sourceForger),
		forwarded: newSource(m, cfg, sourceRemotes),
	}
	rt.maxLag.Store(cfg.MaxLag)
	rt.SetLogLimits(cfg.LogLimits)
	rt.SetStaticAnswers(cfg.Static)
	if c, ok := head.(canonicalOf); ok {
		rt.canonical = c.CanonicalHash
	}
	if c, ok := head.(canonicalNumberOf); ok {
		rt.canonicalNumber = c.CanonicalNumber
	}
	rt.SetCache(cfg.Cache)
	if rt.history != nil {
		rt.wt = newWriteThrough(rt.history, rt.forge, rt.settled, cfg.WriteThroughQueue, log,
			m.writeThrough.MustCurryWith(prometheus.Labels{"chain": cfg.Chain}))
		rt.wt.links.confirm = cfg.Confirm
		rt.wt.links.canonical = rt.canonical
		if l, ok := rt.history.(storedLinks); ok {
			rt.wt.links.stored = l.Links
		}
	}
	return rt
}

// SetMaxLag changes how far the head window may trail the remotes and
// still answer (Config.MaxLag), for a configuration reload.
func (rt *Router) SetMaxLag(n uint64) { rt.maxLag.Store(n) }

// Run writes through, until ctx ends, the settled blocks clients fetched
// from the remotes because the history store lacked them. Without History
// it returns at once; without Run the write-through queue only fills and
// drops.
func (rt *Router) Run(ctx context.Context) {
	if rt.wt != nil {
		rt.wt.run(ctx)
	}
}

// ServeRPC answers one call.
func (rt *Router) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	if res, ok, err := rt.staticAnswer(req); ok {
		rt.local.answered(ctx)
		return res, err
	}
	switch req.Method {
	case "eth_chainId":
		// Every remote was verified to be on this chain: no upstream call.
		rt.local.answered(ctx)
		return rt.chainID, nil
	case "eth_subscribe", "eth_unsubscribe":
		rt.local.answered(ctx)
		switch subs := rt.cfg.Subscriptions; {
		case subs == nil:
			return nil, errNotifications
		case req.Method == "eth_subscribe":
			return subs.Subscribe(ctx, req.Params)
		default:
			return subs.Unsubscribe(ctx, req.Params)
		}
	}
	// The one reading of the call: every source below takes it.
	c := evm.ParseCall(req.Method, req.Params)
	if err := rt.checkFilter(&c); err != nil {
		rt.local.answered(ctx)
		return nil, err
	}
	if rt.cfg.Filters != nil && isFilterMethod(req.Method) {
		rt.local.answered(ctx)
		return rt.cfg.Filters.ServeFilter(ctx, rt, req)
	}
	ctx, floor, ferr := rt.floor(ctx)
	if ferr != nil {
		rt.local.answered(ctx)
		return nil, ferr
	}
	if rt.fresh() && rt.reaches(floor) {
		_, sp := rt.lookup(ctx, spanHead)
		res, ok := rt.head.Answer(c)
		endLookup(sp, ok)
		if ok {
			rt.fromHead.answered(ctx)
			return res, nil
		}
		rt.pin(&c)
	}
	if res, handled, err := rt.stored(ctx, req, &c); handled {
		return res, err
	}
	var (
		res json.RawMessage
		err error
	)
	if ch := rt.cacheFor(&c); ch != nil {
		res, err = rt.cachedForward(ctx, ch, req, &c)
	} else {
		res, err = rt.forward(ctx, &c)
		rt.answeredBy(ctx, err, rt.forwarded)
	}
	if err == nil && c.Kind == evm.KindBlockNumber && rt.head != nil {
		res = rt.blockNumber(res)
	}
	return res, err
}

// forward sends c to the remotes as the router parsed it (and pinning may
// have rewritten it): they do not read its params again.
func (rt *Router) forward(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	return rt.up.ServeCall(ctx, *c)
}

// blockNumber is what a client gets of a remote's eth_blockNumber: never
// above the cluster's corroborated head (one remote may lie about its
// head, and what it said must not become the floor every later answer
// keeps), and never below an answer this replica gave before (a remote
// behind the window must not move a client's head backwards).
func (rt *Router) blockNumber(res json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(res, &s) != nil {
		return res
	}
	n, err := evm.ParseQuantity(s)
	if err != nil {
		return res
	}
	var m uint64
	if c := rt.corroborated(); c > 0 {
		m = rt.head.Monotonic(min(n, c), c)
	} else {
		// Nothing to check the answer against: served, not recorded.
		m = max(n, rt.head.Monotonic(0, 0))
	}
	if m == n {
		return res
	}
	return json.RawMessage(`"` + evm.Quantity(m) + `"`)
}

// corroborated is the cluster's corroborated head: the higher of the
// window's and the remotes' in rotation (0: unknown). Heads that say
// nothing of the chain now are left out: the remotes' when none reported
// lately, the window's when it is older than that allows too (a replica
// that was paused wakes with both old).
func (rt *Router) corroborated() uint64 {
	var c uint64
	lately := rt.heardLately()
	if lately {
		c = rt.up.HealthyHead()
	}
	if n, ok := rt.head.Latest(); ok && (lately || rt.headTimely()) {
		c = max(c, n)
	}
	return c
}

// headTimely reports whether the window's head is recent by its timestamp
// (always, where the window does not say).
func (rt *Router) headTimely() bool {
	if rt.headRef == nil {
		return true
	}
	_, _, ts, ok := rt.headRef.HeadRef()
	if !ok {
		return false
	}
	_, ok = rt.timely(ts)
	return ok
}

// Freshness limits (fresh).
const (
	// staleBlocks block times: a window head older than this, with no
	// head heard from the remotes since, says nothing of the chain now.
	staleBlocks = 5
	// minStale floors that age: timestamps tick in whole seconds, and a
	// loaded machine's head polls come late.
	minStale = 2 * time.Second
)

// staleness is why the head window may not answer; fresh when it may.
type staleness uint32

const (
	fresh    staleness = iota
	trailing           // more than MaxLag behind the remotes
	forked             // its head is not the remotes' block at that height
	old                // older than the block time allows, and nothing heard since
)

// fresh reports whether the head window may answer: it follows the feed,
// it is not more than MaxLag behind the remotes in rotation, its head is
// the block they have at that height (by hash: the chain's tip says so,
// or a remote in rotation still reports it), and its head is no older
// than the chain's block time allows, or a remote reported its head since
// then (a quiet chain). A stale window could miss a reorg; the remotes
// can't. Every part of the router that reads the window asks this first.
func (rt *Router) fresh() bool {
	if rt.head == nil {
		return false
	}
	n, ok := rt.head.Latest()
	if !ok {
		return false
	}
	why, up, detail := rt.staleness(n)
	was := staleness(rt.stale.Load())
	if why == was || !rt.stale.CompareAndSwap(uint32(was), uint32(why)) {
		return why == fresh
	}
	switch why {
	case fresh:
		rt.log.Info("head window caught up with the remotes", "window_head", n, "remotes_head", up)
	case trailing:
		rt.log.Warn("head window trails the remotes; calls go to the remotes until it catches up",
			"window_head", n, "remotes_head", up, "max_lag", rt.maxLag.Load())
	case forked:
		rt.log.Warn("head window's head is not the remotes' block at that height; calls go to the remotes until it is",
			"window_head", n, "window_hash", detail)
	case old:
		rt.log.Warn("head window's head is older than the block time allows and no remote reported since; calls go to the remotes",
			"window_head", n, "age", detail)
	}
	return why == fresh
}

// staleness judges the window, whose head is n: why it may not answer,
// the remotes' head, and what the log says of it.
func (rt *Router) staleness(n uint64) (staleness, uint64, string) {
	if rt.headRef != nil {
		if hn, hash, ts, ok := rt.headRef.HeadRef(); ok {
			if h, ok := rt.up.HashAt(hn); ok && !strings.EqualFold(h, hash) && !rt.up.Reports(hn, hash) {
				return forked, 0, hash
			}
			if age, ok := rt.timely(ts); !ok {
				return old, 0, age.String()
			}
		}
	}
	up := rt.up.HealthyHead()
	if up > n+rt.maxLag.Load() {
		return trailing, up, ""
	}
	return fresh, up, ""
}

// timely reports whether a head with timestamp ts (unix seconds) may still
// be the chain's: no older than staleBlocks block times (and minStale), or
// a remote in rotation reported its head within that time. age is the
// head's.
func (rt *Router) timely(ts uint64) (age time.Duration, ok bool) {
	now := rt.now()
	allow := max(staleBlocks*rt.up.BlockTime(), minStale)
	age = now.Sub(time.Unix(int64(min(ts, 1<<62)), 0))
	if age <= allow {
		return age, true
	}
	return age.Round(time.Millisecond), rt.up.HeardWithin(now, allow)
}

// heardLately reports whether the remotes' heads say something of the
// chain now: a remote in rotation reported its head within the time the
// block time allows.
func (rt *Router) heardLately() bool {
	return rt.up.HeardWithin(rt.now(), max(staleBlocks*rt.up.BlockTime(), minStale))
}

// pin rewrites a latest, safe or finalized block parameter to the
// cluster's number for it, so that every replica and every remote answers
// for the same block, whichever remote the call lands on.
func (rt *Router) pin(c *evm.Call) {
	if c.BlockAt < 0 || len(c.BlockRaw) == 0 || c.BlockRaw[0] != '"' || !c.BlockOK {
		// None, absent (the node's own default), an EIP-1898 object (as
		// sent), or not a block: the node's to read.
		return
	}
	var n uint64
	switch c.Block.Kind {
	case evm.RefLatest, evm.RefSafe, evm.RefFinalized:
	default:
		return
	}
	tags, ok := rt.head.Tags()
	if !ok {
		return
	}
	switch c.Block.Kind {
	case evm.RefLatest:
		n = tags.Latest
	case evm.RefSafe:
		n = tags.Safe
	case evm.RefFinalized:
		n = tags.Finalized
	}
	if n == 0 || rt.up.HealthyHead() < n {
		// No remote in rotation has the block yet: the call keeps its
		// tag rather than fail with "header not found" everywhere.
		return
	}
	c.SetBlock(n)
}

// Metrics count where calls were answered.
type Metrics struct {
	answers      *prometheus.CounterVec
	writeThrough *prometheus.CounterVec
}

// NewMetrics registers the router's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{answers: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "venn", Name: "answers_total",
		Help: "Calls by where they were answered: local (venn itself), head (the head window), " +
			"history (the history store, with the remotes for parts of a range it lacks), " +
			"cache (the response cache), forger (built from other calls or stored blocks) or remotes.",
	}, []string{"chain", "source"}),
		writeThrough: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "history_writethrough_total",
			Help: "Settled blocks clients fetched from the remotes, written through to the history store, " +
				"by outcome: queued, duplicate (already queued), dropped (queue full), stored, " +
				"orphan (not the canonical block), conflict (refused by the store), failed, " +
				"foreign (the chain the cluster follows has another block there), " +
				"unlinked (nothing the window, the store or a second remote holds links it to that chain).",
		}, []string{"chain", "outcome"})}
	if reg != nil {
		reg.MustRegister(m.answers, m.writeThrough)
	}
	return m
}

// DropChain deletes chain's series, once its router has stopped for good
// (a reload removed the chain): a router of the chain built later
// resolves them afresh, and the old one's late counts (a call that was
// still in flight) go to series no longer exported.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	m.answers.DeletePartialMatch(l)
	m.writeThrough.DeletePartialMatch(l)
}

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
// and finalized pinned to the cluster's numbers.
package router

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"

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
	// ConfirmHash). The write-through stores a block that links to
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

// headOf is what the router needs of the remotes to tell a stale window,
// and a number no remote could answer for: the best head among those in
// rotation.
type headOf interface{ HealthyHead() uint64 }

// callServer is the remotes taking a call the router parsed, so that they
// do not read its params again (remotes.Pool); a plain jrpc.Handler gets
// the request.
type callServer interface {
	ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error)
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
	remotes jrpc.Handler
	calls   callServer                  // remotes, when they take parsed calls; else nil
	upHead  func() uint64               // the remotes' head; nil when they don't say
	history History                     // nil: no history store
	cache   atomic.Pointer[cache.Cache] // nil: no response cache; a reload swaps it (SetCache)
	// canonical is the head window's canonical hash of a number; nil
	// without a window that says.
	canonical func(n uint64) (string, bool)
	// canonicalNumber is the head window's number of a canonical block's
	// hash; nil without a window that says.
	canonicalNumber func(hash string) (uint64, bool)
	hashes          settledHashes // settled blocks' hashes from header lookups
	forge           *forger.Forger
	wt              *writeThrough // nil without history
	log             *slog.Logger

	// trailing is set while the window trails the remotes by more than
	// MaxLag: logged once when it starts and once when it ends.
	trailing atomic.Bool
	// maxLag is cfg.MaxLag, which a reload may change (SetMaxLag).
	maxLag atomic.Uint64
	// logLimits is cfg.LogLimits defaulted, which a reload may change
	// (SetLogLimits).
	logLimits atomic.Pointer[LogLimits]

	local, fromHead, fromStore, fromCache, forged, forwarded origin
}

var _ jrpc.Handler = (*Router)(nil)

// New builds a chain's router in front of its remotes; head may be nil.
func New(cfg Config, head Head, remotes jrpc.Handler, m *Metrics) *Router {
	if m == nil {
		m = NewMetrics(nil)
	}
	var upHead func() uint64
	if h, ok := remotes.(headOf); ok {
		upHead = h.HealthyHead
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("chain", cfg.Chain)
	calls, _ := remotes.(callServer)
	rt := &Router{
		calls:     calls,
		upHead:    upHead,
		cfg:       cfg,
		chainID:   json.RawMessage(`"` + evm.Quantity(cfg.ChainID) + `"`),
		head:      head,
		remotes:   remotes,
		history:   cfg.History,
		forge:     forger.ForHandler(remotes, log),
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

// errNotifications is geth's answer to eth_subscribe where notifications
// cannot be delivered.
var errNotifications = &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "notifications not supported"}

// ServeRPC answers one call.
func (rt *Router) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
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
	if err := rt.checkFilter(&c, req.Params); err != nil {
		rt.local.answered(ctx)
		return nil, err
	}
	if rt.cfg.Filters != nil && isFilterMethod(req.Method) {
		rt.local.answered(ctx)
		return rt.cfg.Filters.ServeFilter(ctx, rt, req)
	}
	if rt.fresh() {
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
		res, err = rt.forward(ctx, req, &c)
		rt.answeredBy(ctx, err, rt.forwarded)
	}
	if err == nil && c.Kind == evm.KindBlockNumber && rt.head != nil {
		res = rt.blockNumber(res)
	}
	return res, err
}

// forward sends c to the remotes: parsed, when they take it so; else as
// the client's request with c's params (which pinning may have rewritten).
// req is nil for calls the router builds.
func (rt *Router) forward(ctx context.Context, req *jrpc.Request, c *evm.Call) (json.RawMessage, error) {
	if rt.calls != nil {
		return rt.calls.ServeCall(ctx, *c)
	}
	r := jrpc.Request{Method: c.Method, Params: c.Params}
	if req != nil {
		r.ID = req.ID
	}
	return rt.remotes.ServeRPC(ctx, &r)
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
// window's and the remotes' in rotation (0: unknown).
func (rt *Router) corroborated() uint64 {
	var c uint64
	if rt.upHead != nil {
		c = rt.upHead()
	}
	if n, ok := rt.head.Latest(); ok {
		c = max(c, n)
	}
	return c
}

// fresh reports whether the head window may answer: it follows the feed
// and is not more than MaxLag behind the remotes. A stale window could
// miss a reorg; the remotes can't.
func (rt *Router) fresh() bool {
	if rt.head == nil {
		return false
	}
	n, ok := rt.head.Latest()
	if !ok {
		return false
	}
	if rt.upHead == nil {
		return true
	}
	up := rt.upHead()
	maxLag := rt.maxLag.Load()
	if up <= n+maxLag {
		if rt.trailing.Load() && rt.trailing.CompareAndSwap(true, false) {
			rt.log.Info("head window caught up with the remotes", "window_head", n, "remotes_head", up)
		}
		return true
	}
	if rt.trailing.CompareAndSwap(false, true) {
		rt.log.Warn("head window trails the remotes; calls go to the remotes until it catches up",
			"window_head", n, "remotes_head", up, "max_lag", maxLag)
	}
	return false
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
	if n == 0 || rt.upHead != nil && rt.upHead() < n {
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

package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// Cache is one chain's response cache: memory first, then the tiers app
// appends (Redis, Postgres), each asked in order; a hit below fills the
// tiers above. Concurrent misses for one key share one upstream call in
// the process (and, through a Claimer tier, in the cluster).
type Cache struct {
	chain  string
	policy *policy
	tiers  []*layer // memory first
	memory *Memory
	recent *recentIndex
	admit  *admission // of near-head answers
	flight flights
	served served
	counts sync.Map // countKey → prometheus.Counter
	// closed is set by Close: the calls still on the cache count only
	// into series resolved before, so a removed chain's deleted series
	// stay deleted.
	closed closing
	// lacksBlock is Options.LacksBlock; nil: no error says so.
	lacksBlock func(method string, err error) bool
	cfg        Config
	log        *slog.Logger
	m          *Metrics
}

// Options are what a chain's cache is built with besides its Config.
type Options struct {
	Chain string
	// Lower are the tiers below memory, in the order they are asked.
	Lower  []Layer
	Logger *slog.Logger // nil: discarded
	// Metrics are shared by every chain's cache; nil: unregistered.
	Metrics *Metrics
	// IsRevert reports an error that is a revert: the caller's own,
	// deterministic at its block (the remotes' classification); nil: no
	// error is stored.
	IsRevert func(method string, err error) bool
	// LacksBlock reports an error that says the remotes lack the call's
	// block (header not found, unknown block: the remotes'
	// classification); nil: none does. A near-head miss pinned to the
	// canonical block's hash that fails so is sent once more by number
	// (fetch).
	LacksBlock func(method string, err error) bool
}

// New builds a chain's cache from a defaulted, valid cfg; it does no I/O.
// Run evicts near-head entries a reorg orphaned; Close stops the memory
// tier.
func New(cfg Config, o Options) *Cache {
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("chain", o.Chain)
	c := &Cache{chain: o.Chain, policy: newPolicy(cfg, o.IsRevert), lacksBlock: o.LacksBlock, cfg: cfg, log: log, m: o.Metrics}
	c.memory = NewMemory(cfg.MemoryBytes, func(reason string) {
		c.closed.ifOpen(func() { // a late store on a removed chain's cache counts nothing
			c.tiers[0].evictions.WithLabelValues(reason).Inc()
		})
	})
	mem := Layer{Tier: c.memory, RecentTTL: cfg.RecentTTL}
	for _, l := range append([]Layer{mem}, o.Lower...) {
		c.tiers = append(c.tiers, newLayer(l, o.Chain, cfg.TierTimeout, log, o.Metrics, &c.closed))
	}
	c.recent = newRecentIndex(cfg.RecentTTL, time.Now)
	c.admit = newAdmission(cfg.RecentTTL, time.Now)
	o.Metrics.watch(c)
	return c
}

// Keeps reports whether method is in the cached set: only its calls are
// worth a lookup.
func (c *Cache) Keeps(method string) bool { return c.policy.caches(method) }

// Close stops the memory tier's maintenance and takes the cache's tiers
// out of venn_cache_bytes and venn_cache_entries; the lower tiers are
// their owners' to close.
func (c *Cache) Close() {
	c.closed.close()
	c.m.unwatch(c)
	c.memory.Close()
}

// Fetch asks upstream for the call's answer: what the pool accepted. pinned
// is the hash of the block a near-head answer is to be stored under (""
// when the call's own block fixes it): the call must be sent pinned to that
// block (evm.Call.WithBlockHash), for a remote on another branch answers
// by number for its own block, and that answer would be stored under the
// canonical block's hash. When the pinned call fails because the remotes
// lack the block (Options.LacksBlock), fetch is asked once more with ""
// (by number), and that answer is served, not stored.
type Fetch func(ctx context.Context, pinned string) (json.RawMessage, error)

// Outcome is the cache's word on one call, as X-Venn-Cache says it.
type Outcome uint8

const (
	None   Outcome = iota // not a call the cache keeps (or not now: its block is not fixed)
	Hit                   // answered from a tier
	Miss                  // fetched, and stored when it may be kept
	Bypass                // the client asked for a fresh answer: fetched, stored
)

// String is the outcome's X-Venn-Cache word ("" for None: the transport
// says none).
func (o Outcome) String() string {
	switch o {
	case Hit:
		return "hit"
	case Miss:
		return "miss"
	case Bypass:
		return "bypass"
	}
	return ""
}

// Serve answers c from the cache, or by fetch, storing what fetch answers
// when it may be kept: Look, then Fill when no tier answered. The router
// calls the two apart, so that a hit's call stays on its stack.
func (c *Cache) Serve(ctx context.Context, call *evm.Call, at View, skip bool, fetch Fetch) (json.RawMessage, error, Outcome) {
	return c.Fill(ctx, c.Look(ctx, call, at, skip), call, at, fetch)
}

// Probe is what Look found of one call: a tier's answer (Hit), or its key
// for Fill.
type Probe struct {
	o   Outcome // Hit: res and err are the answer; None: the cache does not keep the call (or not now)
	k   Key
	p   pin
	res json.RawMessage
	err error
}

// Hit is the answer when a tier held it; ok is false for a call Fill is
// to fetch.
func (pr *Probe) Hit() (res json.RawMessage, err error, ok bool) {
	return pr.res, pr.err, pr.o == Hit
}

// Look asks the tiers for call's answer. at resolves the call's block;
// skip (the client's no-cache) bypasses the read, not the store. A tier's
// failure is a miss, never the client's error. call is only read: a
// caller's copy on its stack stays there, and a hit costs no allocation
// of the caller's.
func (c *Cache) Look(ctx context.Context, call *evm.Call, at View, skip bool) Probe {
	if !c.policy.caches(call.Method) {
		return Probe{o: None}
	}
	k, p, ok := deriveKey(c.chain, call, at)
	if !ok {
		c.count(call.Method, "any", "unkeyed")
		return Probe{o: None}
	}
	if skip {
		c.count(call.Method, "any", "bypass")
		return Probe{o: Bypass, k: k, p: p}
	}
	if res, err, ok := c.lookup(ctx, k, p, call.Method); ok {
		c.served.note(Hit)
		return Probe{o: Hit, res: res, err: err}
	}
	return Probe{o: Miss, k: k, p: p}
}

// Fill answers the call pr was Look's reading of: from the tier that held
// it, or by fetch, once for every caller of the process with the key,
// storing what fetch answers when it may be kept. The flight holds call
// and at until fetch returns; neither is kept after Fill returns.
func (c *Cache) Fill(ctx context.Context, pr Probe, call *evm.Call, at View, fetch Fetch) (json.RawMessage, error, Outcome) {
	switch pr.o {
	case Hit:
		return pr.res, pr.err, Hit
	case None:
		res, err := fetch(ctx, "")
		return res, err, None
	}
	o, k, p, skip := pr.o, pr.k, pr.p, pr.o == Bypass
	if !skip && c.refuses(call.Method, p, k) {
		res, err := fetch(ctx, "")
		c.served.note(o)
		return res, err, o
	}
	// Bypassing calls share a flight only with each other: they are not
	// to be served another replica's stored answer.
	fk := flightKey{k: k, bypass: skip}
	fl, lead := c.flight.join(fk)
	var a answer
	if lead {
		m := missed{method: call.Method, params: call.Params, at: at, key: k, pin: p, skip: skip}
		a = c.lead(ctx, fk, fl, &m, fetch)
	} else {
		fl.wg.Wait()
		a = fl.a
	}
	if !lead && isCut(a.err) && ctx.Err() == nil {
		// The call this one joined was cut by its own client.
		res, err, _, _ := c.fetchAt(ctx, call.Method, fetch, p, at, nil)
		c.served.note(o)
		return res, err, o
	}
	if a.hit {
		o = Hit
	}
	c.served.note(o)
	return a.res, a.err, o
}

// refuses reports a near-head miss the doorkeeper keeps out (admission):
// sent as the client sent it, neither claimed nor pinned nor stored, and
// in no flight. A concurrent asker of its key finds the key seen, and
// leads the flight that stores.
func (c *Cache) refuses(method string, p pin, k Key) bool {
	if !p.recent || c.proves(method) || c.admit.admit(k) {
		return false
	}
	c.count(method, "any", "unadmitted")
	return true
}

// flights are the misses in flight in the process, one per key: a miss
// joins its key's, or leads a new one. Unlike a singleflight.Group it takes
// no closure and boxes no answer, so a miss's call, fetch and key stay on
// its caller's stack (an evm.Call is over a kilobyte).
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

// flightKey is a key's flight; bypassing calls have their own.
type flightKey struct {
	k      Key
	bypass bool
}

// flight is one miss in flight; a is set before wg is done.
type flight struct {
	wg sync.WaitGroup
	a  answer
}

// join returns k's flight, and whether this call leads it (then it must
// end it with done).
func (f *flights) join(k flightKey) (fl *flight, lead bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[k]; fl != nil {
		return fl, false
	}
	if f.m == nil {
		f.m = map[flightKey]*flight{}
	}
	fl = &flight{}
	fl.wg.Add(1)
	f.m[k] = fl
	return fl, true
}

// done ends k's flight fl with a: its waiters wake with it, and the next
// miss of k leads a new one.
func (f *flights) done(k flightKey, fl *flight, a answer) {
	fl.a = a
	f.mu.Lock()
	delete(f.m, k)
	f.mu.Unlock()
	fl.wg.Done()
}

// errFlightPanicked is what the waiters of a flight whose leader panicked
// are answered.
var errFlightPanicked = errors.New("cache: the shared fetch failed")

// lead runs the miss of flight fl and ends it, a panic included: its
// waiters are never left waiting.
func (c *Cache) lead(ctx context.Context, k flightKey, fl *flight, m *missed, fetch Fetch) (a answer) {
	a.err = errFlightPanicked
	defer func() { c.flight.done(k, fl, a) }()
	a = c.miss(ctx, m, fetch)
	return a
}

// answer is one flight's outcome.
type answer struct {
	res json.RawMessage
	err error
	hit bool // from a tier after all: a flight that just stored, or another replica after its claim
}

// isCut reports an error of a call cut short by its caller.
func isCut(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lookup asks each tier in order for the answer; a hit fills the tiers
// above it.
func (c *Cache) lookup(ctx context.Context, k Key, p pin, method string) (json.RawMessage, error, bool) {
	for i, l := range c.tiers {
		e, ok := l.get(ctx, k)
		if !ok {
			c.count(method, l.name, "miss")
			continue
		}
		res, err, good := e.answer()
		if !good {
			c.count(method, l.name, "miss")
			continue
		}
		c.count(method, l.name, "hit")
		l.hits.Add(1)
		c.fill(ctx, k, p, e, c.tiers[:i])
		return res, err, true
	}
	return nil, nil, false
}

// fill stores e in tiers (those above the one it was found in).
func (c *Cache) fill(ctx context.Context, k Key, p pin, e Entry, tiers []*layer) {
	for _, l := range tiers {
		l.set(ctx, k, e)
	}
	if p.recent && len(tiers) > 0 {
		c.recent.add(p.hash, p.number, k)
	}
}

// missed is one call the tiers did not answer. Its fetch goes beside it,
// not in it: escape analysis follows a struct's pointers as one, and the
// pin's hash, which the tiers keep, would take the fetch's closure (and
// the caller's call in it) to the heap.
type missed struct {
	method string
	params json.RawMessage // the call's, read only by the proof check
	at     View
	key    Key
	pin    pin
	skip   bool
}

// miss asks upstream once for every caller in the process, after the
// cluster's claim when a tier shares misses, and stores what may be kept.
// The claim ends with the fetch, whatever its outcome: by the store, or
// else released, so that no replica waits for an answer that is not
// coming.
func (c *Cache) miss(ctx context.Context, m *missed, fetch Fetch) answer {
	var claimed *layer // the tier whose claim this flight holds
	if !m.skip {
		// A flight for the key may have ended, stored, between this
		// call's lookup and its flight.
		if e, ok := c.tiers[0].get(ctx, m.key); ok {
			if res, err, good := e.answer(); good {
				return answer{res: res, err: err, hit: true}
			}
		}
		e, ok, l := c.awaitClaim(ctx, m.key, m.pin)
		if ok {
			c.count(m.method, "any", "claimed")
			res, err, _ := e.answer()
			return answer{res: res, err: err, hit: true}
		}
		claimed = l
	}
	stored := false
	if claimed != nil {
		defer func() {
			if !stored {
				claimed.release(ctx, claimed.Tier.(Claimer), m.key)
			}
		}()
	}
	// With verify: proofs the proof's fetches start once the block's hash
	// is known, beside the answer's.
	var pf *proofFetch
	var onPin func(hash string)
	if c.proves(m.method) {
		onPin = func(hash string) { pf = c.startProof(ctx, m.method, m.params, hash, m.at) }
		defer func() {
			if pf != nil {
				pf.stop()
			}
		}()
	}
	res, err, unpinned, remote := c.fetchAt(ctx, m.method, fetch, m.pin, m.at, onPin)
	if unpinned {
		return answer{res: res, err: err}
	}
	e, keep := c.policy.entry(m.method, m.pin, res, err)
	if keep && !e.Error && onPin != nil {
		res, err, keep = c.prove(m.method, pf, res)
	}
	e.Remote, e.Written = remote, time.Now().UnixMilli()
	if keep && m.pin.recent {
		// The block may have been orphaned while upstream answered: an
		// answer keyed by a hash no longer canonical is not stored.
		hash, ok := m.at.CanonicalHash(m.pin.number)
		keep = ok && hash == m.pin.hash
	}
	if keep {
		stored = c.store(ctx, m.key, m.pin, e, m.method, claimed)
	}
	return answer{res: res, err: err}
}

// fetchAt asks upstream for the answer at p's block, pinned to its hash
// when p is a number's: a recent key's block, or the settled block at
// that number as the cluster knows it (View.SettledHash), so that a
// remote on another chain or fork, which lacks the block, cannot answer
// it. When the remotes lack that block (they trail the head window, or
// follow another branch there), or the settled block's hash is not known,
// the call goes once more as the client sent it, by number, and is
// answered as it would be without the cache: unpinned, that answer is
// served and never stored, for nothing says which chain's block it was
// computed on. Traces go by number: their block param is not EIP-1898's.
// remote names the remotes that answered (the call's note of its fetch).
// onPin (nil: none) is told the hash of the block the answer will be of,
// just before the fetch that may give a stored answer.
func (c *Cache) fetchAt(ctx context.Context, method string, fetch Fetch, p pin, at View, onPin func(hash string)) (res json.RawMessage, err error, unpinned bool, remote string) {
	hash := p.pinned()
	if p.settled && !p.byHash && !isTrace(method) {
		h, ok := at.SettledHash(ctx, p.number)
		if !ok {
			c.count(method, "any", "unpinned")
			res, err = fetch(ctx, "")
			return res, err, true, ""
		}
		hash = h
	}
	if onPin != nil {
		if hash != "" {
			onPin(hash)
		} else if p.byHash {
			onPin(p.hash)
		}
	}
	res, err, remote = noted(ctx, fetch, hash)
	if hash == "" || ctx.Err() != nil || !c.lacks(method, res, err) {
		return res, err, false, remote
	}
	c.count(method, "any", "unpinned")
	res, err = fetch(ctx, "")
	return res, err, true, ""
}

// noted is fetch under a note of its own, merged into the call's after
// it: the remotes that answered, which the entry records.
func noted(ctx context.Context, fetch Fetch, hash string) (json.RawMessage, error, string) {
	n := &jrpc.Note{}
	res, err := fetch(jrpc.WithNote(ctx, n), hash)
	jrpc.NoteOf(ctx).Merge(n)
	return res, err, n.Remote
}

// lacks reports an answer by block hash that says the remote lacks the
// block: the remotes' verdict on an error, or geth's null for
// eth_getBlockReceipts of a block it does not have.
func (c *Cache) lacks(method string, res json.RawMessage, err error) bool {
	if err != nil {
		return c.lacksBlock != nil && c.lacksBlock(method, err)
	}
	return method == "eth_getBlockReceipts" && string(bytes.TrimSpace(res)) == "null"
}

// store writes e to every tier that keeps it; it reports whether claimed
// (the tier of the flight's claim, nil: none) stored it, which ended the
// claim.
func (c *Cache) store(ctx context.Context, k Key, p pin, e Entry, method string, claimed *layer) bool {
	ended := false
	for _, l := range c.tiers {
		if l.set(ctx, k, e) {
			c.count(method, l.name, "stored")
			ended = ended || l == claimed
		}
	}
	if p.recent {
		c.recent.add(p.hash, p.number, k)
	}
	return ended
}

// awaitClaim claims k in the first Claimer tier (mine: that tier, for the
// flight to end the claim); when another replica holds the claim it waits
// for that replica's answer (ok), at most claim_hold, and no longer than
// the claim: a claim that ends without an answer sends this call
// upstream at once.
func (c *Cache) awaitClaim(ctx context.Context, k Key, p pin) (e Entry, ok bool, mine *layer) {
	for i, l := range c.tiers {
		cl, isClaimer := l.Tier.(Claimer)
		if !isClaimer {
			continue
		}
		if l.claim(ctx, cl, k, c.cfg.ClaimHold) {
			return Entry{}, false, l
		}
		e, ok := l.await(ctx, cl, k, c.cfg.ClaimHold)
		if ok {
			if _, _, good := e.answer(); !good {
				return Entry{}, false, nil
			}
			c.fill(ctx, k, p, e, c.tiers[:i])
		}
		return e, ok, nil
	}
	return Entry{}, false, nil
}

// count counts one lookup outcome; method is in the cached set (bounded
// by the config). Each series is looked up in the vector once: a hit
// counts on every call, and the vector hashes and checks its labels each
// time it is asked.
func (c *Cache) count(method, tier, outcome string) {
	k := countKey{method, tier, outcome}
	if ctr, ok := c.counts.Load(k); ok {
		ctr.(prometheus.Counter).Inc()
		return
	}
	c.closed.ifOpen(func() {
		ctr, _ := c.counts.LoadOrStore(k, c.m.requests.WithLabelValues(c.chain, method, tier, outcome))
		ctr.(prometheus.Counter).Inc()
	})
}

// countKey names one series of venn_cache_requests_total of the chain.
type countKey struct{ method, tier, outcome string }

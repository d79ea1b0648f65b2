package remotes

// The chain's head as the pool believes it. Every remote reports heads (a
// poll of its latest block, or newHeads): number, hash, parent hash and
// timestamp. A report moves the chain's head, and so every other remote's
// lag, only once something corroborates it (corroborate): a remote that
// claims a head far beyond what the block time allows, that no other remote
// confirms and whose parent nobody knows, is not followed; it keeps the
// last head of its that was, lags out of rotation as the chain moves on,
// and is counted a misbehaviour. The same head hash replaced at the same
// height is a reorg: the tip moves to the sibling and HeadChanged fires.
//
// The block time the heads are judged and polled by is blocktime.go's.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// headJudgement is the pool's view of one remote's heads, guarded by
// Heads.mu.
type headJudgement struct {
	vouched *heads.Report // its highest corroborated report; nil: none
	// alone: vouched was taken only because no other remote could
	// witness it; it is judged again once one can.
	alone     bool
	held      *heads.Report // the first report nothing corroborated, while that lasts
	heldSince time.Time
}

// Heads is a chain's head tracking, which its pool owns and hands out
// (Pool.Heads): the chain's tip, judged from every remote's reports; its
// block time (blocktime.go); the leader's poll plan (heads.Plan); the
// recent canonical hashes (tipchain.go); the cluster's head feed (feed.go);
// the stall watch (heads.Stalls); and the remotes' chain checks it asks for
// (chaincheck.go). It never sends a client's call.
type Heads struct {
	p *Pool

	mu      sync.Mutex
	tip     *heads.Report // the chain's head: the highest vouched report
	tipBy   *Remote       // the remote whose report tip is
	revoked bool          // the tip's report lost its vouching: pick again
	clock   heads.Clock
	wake    chan struct{} // closed and replaced when the tip moves
	retime  chan struct{} // closed and replaced when the poll interval moves, or a remote's fed flag (feed.go)
	claims  chan struct{} // closed and replaced when a remote reports a new head (feed.go)

	// best is the tip's number and cur the tip, read without mu; learned
	// is the block time its timestamps say and fastest the fastest pace
	// they showed (nanoseconds; 0 until known).
	best       atomic.Uint64
	cur        atomic.Pointer[heads.Report]
	canon      atomic.Pointer[heads.Chain] // tipchain.go: the recent canonical hashes
	pace       heads.Plan                  // blocktime.go: the leader's poll plan
	stall      heads.Stalls                // tipchain.go: heads that may be old news
	learned    atomic.Int64
	fastest    atomic.Int64
	bootstraps atomic.Int32 // block time fetches tried

	headG      prometheus.Gauge // the tip's number
	blockTimeG prometheus.Gauge // the block time blockTime gives, in seconds
}

func (h *Heads) init(p *Pool, m *Metrics, chain string) {
	h.p = p
	h.wake, h.retime, h.claims = make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.headG = m.chainHead.WithLabelValues(chain)
	h.blockTimeG = m.blockTime.WithLabelValues(chain)
}

// heldHead is a report that began to be held, for the log and the
// misbehaviour record after the lock is released.
type heldHead struct {
	r        *Remote
	c        *heads.Report
	tip      uint64
	evidence bool // another remote's head contradicts it
}

// headChanged judges every remote's latest report, moves the chain's tip
// and recomputes every remote's lag. It runs after every head report and
// every poll round.
func (h *Heads) changed() {
	p := h.p
	now := p.now()
	var held []heldHead
	h.mu.Lock()
	bt := h.judgingBlockTime()
	for _, r := range p.members() {
		if hh, ok := h.judge(r, now, bt); ok {
			held = append(held, hh)
		}
	}
	h.moveTip(now)
	h.noteClaims()
	h.mu.Unlock()

	for _, hh := range held {
		hh.r.log.Warn("remote reports a head nothing corroborates; not followed",
			"claimed", hh.c.Number, "chain_head", hh.tip)
		if hh.evidence {
			p.misbehaved(hh.r, misbehave.BogusHead, "eth_getBlockByNumber",
				fmt.Sprintf("claimed head %d while the chain's head is %d", hh.c.Number, hh.tip))
		}
	}
	best := p.healthyBest(now)
	for _, r := range p.members() {
		// Heard only now that its report is judged: a report heard before
		// its head counts would vouch for a window its head shows behind.
		if at := r.reportedAt.Load(); at > r.heardAt.Load() {
			r.heardAt.Store(at)
		}
	}
	h.headG.Set(float64(h.best.Load()))
	for _, r := range p.members() {
		lag := uint64(0)
		if h := r.Head(); h < best {
			lag = best - h
		}
		r.m.lag.Set(float64(lag))
		ok := 0.0
		if r.available(now)&^outBusy == 0 && !p.lagging(r, best) {
			ok = 1
		}
		r.m.healthy.Set(ok)
	}
}

// judgeHead decides whether r's latest report is corroborated. It reports a
// report that begins to be held. h.mu must be held.
func (h *Heads) judge(r *Remote, now time.Time, bt time.Duration) (heldHead, bool) {
	c := r.claim.Load()
	j := &r.ht
	if c == nil || !r.chainVerified() {
		return heldHead{}, false
	}
	if c == j.vouched {
		if j.alone && h.contradicted(r, c, now, bt) {
			// Taken while nothing could witness it; now something does,
			// and it cannot be.
			j.vouched, j.alone = nil, false
			r.head.Store(0)
			if h.tip == c {
				h.revoked = true
			}
			j.held, j.heldSince = c, now
			return heldHead{r: r, c: c, tip: h.best.Load(), evidence: true}, true
		}
		return heldHead{}, false
	}
	ok, alone := h.corroborate(r, c, now, bt)
	if ok {
		if j.held != nil {
			r.log.Info("remote's head corroborated", "head", c.Number)
		}
		j.vouched, j.alone, j.held = c, alone, nil
		r.head.Store(c.Number)
		return heldHead{}, false
	}
	if j.held != nil && c.Number >= j.held.Number {
		return heldHead{}, false // still held: logged once
	}
	j.held, j.heldSince = c, now
	return heldHead{r: r, c: c, tip: h.best.Load(), evidence: h.witnesses(r, now) > 0}, true
}

// corroborate reports whether something vouches for report c of r: its
// parent is a block the pool vouched for; another remote's head reaches
// within max_lag of it; or it is within what the timestamps and the block
// time allow since the chain's tip (at the start, since every other
// remote's report). alone: only because no other remote could witness it.
func (h *Heads) corroborate(r *Remote, c *heads.Report, now time.Time, bt time.Duration) (ok, alone bool) {
	p := h.p
	if c.Time > uint64(now.Add(heads.MaxClockSkew).Unix()) {
		return false, false // a block from the future
	}
	tip := h.tip
	if tip != nil && c.Number == tip.Number+1 && c.Parent == tip.Hash {
		return true, false
	}
	tol := max(p.conf().MaxLag, heads.Slack)
	others, witnesses, plausibleToAll := 0, 0, true
	for _, o := range p.members() {
		if o == r || !o.healthy(now) {
			continue
		}
		others++
		if v := o.ht.vouched; v != nil && v.Number+1 == c.Number && v.Hash == c.Parent {
			return true, false
		}
		oc := o.claim.Load()
		if oc == nil {
			continue
		}
		witnesses++
		if oc.Number+tol >= c.Number {
			return true, false
		}
		plausibleToAll = plausibleToAll && heads.Plausible(c, oc, bt)
	}
	switch {
	case tip != nil && heads.Plausible(c, tip, bt):
		return true, false
	case tip == nil && others == 0:
		return true, true
	case tip == nil && witnesses == others && plausibleToAll:
		return true, false
	}
	// Nothing vouches for it and nothing contradicts it: a remote alone
	// that has stood by it long enough is followed.
	j := &r.ht
	if witnesses == 0 && j.held != nil && c.Number >= j.held.Number && now.Sub(j.heldSince) >= heads.HoldFor {
		return true, true
	}
	return false, false
}

// contradicted reports whether another remote's report shows c cannot be
// the chain's head.
func (h *Heads) contradicted(r *Remote, c *heads.Report, now time.Time, bt time.Duration) bool {
	p := h.p
	tol := max(p.conf().MaxLag, heads.Slack)
	against := false
	for _, o := range p.members() {
		if o == r || !o.healthy(now) {
			continue
		}
		oc := o.claim.Load()
		switch {
		case oc == nil:
		case oc.Number+tol >= c.Number:
			return false // confirmed
		case !heads.Plausible(c, oc, bt):
			against = true
		}
	}
	return against
}

// witnesses counts the other remotes in rotation that reported a head.
func (h *Heads) witnesses(r *Remote, now time.Time) int {
	p := h.p
	n := 0
	for _, o := range p.members() {
		if o != r && o.healthy(now) && o.claim.Load() != nil {
			n++
		}
	}
	return n
}

// moveTip makes the highest vouched report among the remotes in rotation
// the chain's tip: when it is higher, when the tip it replaces lost its
// vouching or is far above it, or when it is a sibling at the same height
// that a remote reported after the tip (a reorg). h.mu must be held.
func (h *Heads) moveTip(now time.Time) {
	p := h.p
	if h.tipBy != nil && h.tipBy.chainState.Load() == chainWrong {
		// Its reporter was found on another chain: the tip is another
		// network's block (CheckTipChain).
		h.revoked = true
	}
	var cand *heads.Report
	var by *Remote
	for _, r := range p.members() {
		v := r.ht.vouched
		if v == nil || !r.healthy(now) {
			continue
		}
		if cand == nil || v.Number > cand.Number || v.Number == cand.Number && v.Seen.After(cand.Seen) {
			cand, by = v, r
		}
	}
	tip := h.tip
	switch {
	case cand == nil || cand == tip:
		return
	case tip == nil, h.revoked, cand.Number > tip.Number, tip.Number-cand.Number > heads.MaxStepBack:
	case cand.Number == tip.Number && cand.Hash != tip.Hash && cand.Seen.After(tip.Seen):
		p.log.Info("chain tip replaced at the same height", "head", cand.Number, "hash", cand.Hash)
	default:
		return
	}
	h.revoked = false
	h.tip, h.tipBy = cand, by
	h.cur.Store(cand)
	h.canon.Store(h.canon.Load().Extend(cand))
	if tip != nil && tip.Number == cand.Number && tip.Hash == cand.Hash {
		return // the same block, reported by another remote
	}
	h.best.Store(cand.Number)
	h.clock.Tip(cand.Number, cand.Time)
	if d, fastest, ok := h.clock.Estimate(); ok {
		h.setLearned(d, fastest)
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

// Head is the chain's head: the highest corroborated head across the
// chain's healthy remotes. It moves forward, and back only when the
// remotes agree on one far below it.
func (h *Heads) Head() uint64 { return h.best.Load() }

// HealthyHead is the highest head among the remotes in rotation right now:
// a block above it cannot be served by any of them yet.
func (h *Heads) HealthyHead() uint64 { return h.p.healthyBest(h.p.now()) }

// HeadChanged returns a channel closed when the tip next changes: a new
// head, or a sibling replacing it at the same height.
func (h *Heads) HeadChanged() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wake
}

// Tip is the chain's head block: its number and hash ("" before the
// first head).
func (h *Heads) Tip() (uint64, string) {
	t := h.cur.Load()
	if t == nil {
		return 0, ""
	}
	return t.Number, t.Hash
}

// HeadStatus is the chain's head as the pool sees it, for status output.
type HeadStatus struct {
	Number uint64
	Hash   string
	// Time is the head block's timestamp; zero before the first head.
	Time time.Time
	// BlockTime is what the polling cadence follows; BlockTimeSource says
	// where it comes from (BlockTimeConfig, BlockTimeLearned or
	// BlockTimeDefault).
	BlockTime       time.Duration
	BlockTimeSource string
	// PollInterval is how often a remote's head is polled; a remote with
	// a ws url is polled only while its newHeads fall silent.
	PollInterval time.Duration
}

// HeadStatus reports the chain's head, its block time and the polling
// cadence.
func (h *Heads) HeadStatus() HeadStatus {
	bt, src := h.blockTime()
	s := HeadStatus{BlockTime: bt, BlockTimeSource: src, PollInterval: h.pollInterval()}
	if t := h.cur.Load(); t != nil {
		s.Number, s.Hash, s.Time = t.Number, t.Hash, time.Unix(int64(min(t.Time, 1<<62)), 0)
	}
	return s
}

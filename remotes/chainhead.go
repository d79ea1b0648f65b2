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
// The block time is learned from the timestamps of the chain's heads
// (blockClock); block_time in config overrides it for the polling cadence.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Head corroboration limits.
const (
	// maxHeadStepBack: a remote reporting a head more than this below the
	// one it reported before was reset, or its earlier report was bogus.
	// Its head follows, so one bad report cannot hold the chain's head
	// (and every other remote's lag) hostage until a restart. A smaller
	// step back (a reorg to a shorter chain, a load-balanced provider's
	// slower backend) is ignored, so routing does not jitter.
	maxHeadStepBack = 64
	// headSlack blocks beyond what the timestamps allow are taken on
	// trust: a fast remote a block or two ahead of the others.
	headSlack = 2
	// headPace: a chain may run up to this many times faster than its
	// learned block time for a while (bursty L2s, a missed slot caught up).
	headPace = 2
	// maxHeadClockSkew: a head whose timestamp is further ahead of this
	// host's clock is bogus, whatever else vouches for it.
	maxHeadClockSkew = 15 * time.Second
	// headHoldFor: the only remote in rotation, reporting a head nothing
	// corroborates, is followed once it has stood by it this long (its
	// timestamps may be right and the learned block time stale).
	headHoldFor = 30 * time.Second
)

// Block time learning limits.
const (
	// blockTimeSamples bounds the heads whose timestamps are kept.
	blockTimeSamples = 64
	// blockTimeMinSpan is the chain time one measured interval spans at
	// least: timestamps tick in whole seconds, and blocks may come faster.
	blockTimeMinSpan = 2
	// blockTimeBootstrap: at the first head, the block this far below it
	// is fetched once, so the block time is known at once.
	blockTimeBootstrap = 64
	// minBlockTime floors what the timestamps say.
	minBlockTime = 50 * time.Millisecond
)

// headReport is one head a remote reported. It is immutable once stored.
type headReport struct {
	Number uint64
	Hash   string
	Parent string
	Time   uint64    // the block's timestamp, unix seconds
	Seen   time.Time // when this remote first reported this block
}

// parseHeadReport reads a block or header (eth_getBlockByNumber's result,
// a newHeads notification's) as a head report.
func parseHeadReport(raw []byte) (*headReport, error) {
	var b struct {
		Number    string `json:"number"`
		Hash      string `json:"hash"`
		Parent    string `json:"parentHash"`
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	num, ok := hexUint(b.Number)
	if !ok {
		return nil, errors.New("head number is not a hex quantity")
	}
	ts, ok := hexUint(b.Timestamp)
	if !ok {
		return nil, errors.New("head timestamp is not a hex quantity")
	}
	if !isHash(b.Hash) || !isHash(b.Parent) {
		return nil, errors.New("head hash is not a 32-byte hex hash")
	}
	return &headReport{Number: num, Hash: b.Hash, Parent: b.Parent, Time: ts}, nil
}

func isHash(s string) bool {
	if len(s) != evm.HashLen || s[:2] != "0x" {
		return false
	}
	for _, c := range s[2:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hexUint(s string) (uint64, bool) {
	if len(s) < 3 || len(s) > 18 || (s[:2] != "0x" && s[:2] != "0X") {
		return 0, false
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	return n, err == nil
}

// headJudgement is the pool's view of one remote's heads, guarded by
// chainHead.mu.
type headJudgement struct {
	vouched *headReport // its highest corroborated report; nil: none
	// alone: vouched was taken only because no other remote could
	// witness it; it is judged again once one can.
	alone     bool
	held      *headReport // the first report nothing corroborated, while that lasts
	heldSince time.Time
}

// chainHead is the pool's part of head tracking.
type chainHead struct {
	mu      sync.Mutex
	tip     *headReport // the chain's head: the highest vouched report
	revoked bool        // the tip's report lost its vouching: pick again
	clock   blockClock
	wake    chan struct{} // closed and replaced when the tip moves
	retime  chan struct{} // closed and replaced when the poll interval moves
}

// heldHead is a report that began to be held, for the log and the
// misbehaviour record after the lock is released.
type heldHead struct {
	r        *Remote
	c        *headReport
	tip      uint64
	evidence bool // another remote's head contradicts it
}

// headChanged judges every remote's latest report, moves the chain's tip
// and recomputes every remote's lag. It runs after every head report and
// every poll round.
func (p *Pool) headChanged() {
	now := p.now()
	var held []heldHead
	h := &p.heads
	h.mu.Lock()
	bt := p.judgingBlockTime()
	for _, r := range p.remotes {
		if hh, ok := p.judgeHead(r, now, bt); ok {
			held = append(held, hh)
		}
	}
	p.moveTip(now)
	h.mu.Unlock()

	for _, hh := range held {
		hh.r.log.Warn("remote reports a head nothing corroborates; not followed",
			"claimed", hh.c.Number, "chain_head", hh.tip)
		if hh.evidence {
			p.misbehaved(hh.r, kindBogusHead, "eth_getBlockByNumber",
				fmt.Sprintf("claimed head %d while the chain's head is %d", hh.c.Number, hh.tip))
		}
	}
	best := p.healthyBest(now)
	p.chainHead.Set(float64(p.best.Load()))
	for _, r := range p.remotes {
		lag := uint64(0)
		if h := r.Head(); h < best {
			lag = best - h
		}
		r.m.lag.Set(float64(lag))
		ok := 0.0
		if r.healthy(now) && !p.lagging(r, best) && !r.cordoned(now) {
			ok = 1
		}
		r.m.healthy.Set(ok)
	}
}

// judgeHead decides whether r's latest report is corroborated. It reports a
// report that begins to be held. h.mu must be held.
func (p *Pool) judgeHead(r *Remote, now time.Time, bt time.Duration) (heldHead, bool) {
	c := r.claim.Load()
	j := &r.ht
	if c == nil || !r.chainVerified() {
		return heldHead{}, false
	}
	if c == j.vouched {
		if j.alone && p.contradicted(r, c, now, bt) {
			// Taken while nothing could witness it; now something does,
			// and it cannot be.
			j.vouched, j.alone = nil, false
			r.head.Store(0)
			if p.heads.tip == c {
				p.heads.revoked = true
			}
			j.held, j.heldSince = c, now
			return heldHead{r: r, c: c, tip: p.best.Load(), evidence: true}, true
		}
		return heldHead{}, false
	}
	ok, alone := p.corroborate(r, c, now, bt)
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
	return heldHead{r: r, c: c, tip: p.best.Load(), evidence: p.witnesses(r, now) > 0}, true
}

// corroborate reports whether something vouches for report c of r: its
// parent is a block the pool vouched for; another remote's head reaches
// within max_lag of it; or it is within what the timestamps and the block
// time allow since the chain's tip (at the start, since every other
// remote's report). alone: only because no other remote could witness it.
func (p *Pool) corroborate(r *Remote, c *headReport, now time.Time, bt time.Duration) (ok, alone bool) {
	if c.Time > uint64(now.Add(maxHeadClockSkew).Unix()) {
		return false, false // a block from the future
	}
	tip := p.heads.tip
	if tip != nil && c.Number == tip.Number+1 && c.Parent == tip.Hash {
		return true, false
	}
	tol := max(p.cfg.MaxLag, headSlack)
	others, witnesses, plausibleToAll := 0, 0, true
	for _, o := range p.remotes {
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
		plausibleToAll = plausibleToAll && plausible(c, oc, bt)
	}
	switch {
	case tip != nil && plausible(c, tip, bt):
		return true, false
	case tip == nil && others == 0:
		return true, true
	case tip == nil && witnesses == others && plausibleToAll:
		return true, false
	}
	// Nothing vouches for it and nothing contradicts it: a remote alone
	// that has stood by it long enough is followed.
	j := &r.ht
	if witnesses == 0 && j.held != nil && c.Number >= j.held.Number && now.Sub(j.heldSince) >= headHoldFor {
		return true, true
	}
	return false, false
}

// contradicted reports whether another remote's report shows c cannot be
// the chain's head.
func (p *Pool) contradicted(r *Remote, c *headReport, now time.Time, bt time.Duration) bool {
	tol := max(p.cfg.MaxLag, headSlack)
	against := false
	for _, o := range p.remotes {
		if o == r || !o.healthy(now) {
			continue
		}
		oc := o.claim.Load()
		switch {
		case oc == nil:
		case oc.Number+tol >= c.Number:
			return false // confirmed
		case !plausible(c, oc, bt):
			against = true
		}
	}
	return against
}

// witnesses counts the other remotes in rotation that reported a head.
func (p *Pool) witnesses(r *Remote, now time.Time) int {
	n := 0
	for _, o := range p.remotes {
		if o != r && o.healthy(now) && o.claim.Load() != nil {
			n++
		}
	}
	return n
}

// plausible reports whether c can follow ref on one chain: it is no
// further above ref than headSlack plus what headPace times the block
// time allows in the time between their timestamps.
func plausible(c, ref *headReport, bt time.Duration) bool {
	if c.Number <= ref.Number+headSlack {
		return true
	}
	if c.Time < ref.Time {
		return false
	}
	// +1 s: timestamps tick in whole seconds.
	span := time.Duration(min(c.Time-ref.Time+1, uint64(maxHeadSpan/time.Second))) * time.Second
	allowed := uint64(headPace * (span / bt))
	return c.Number-ref.Number <= headSlack+allowed
}

// maxHeadSpan caps the time between two heads plausible considers, so
// that its arithmetic cannot overflow (a year is plenty).
const maxHeadSpan = 365 * 24 * time.Hour

// moveTip makes the highest vouched report among the remotes in rotation
// the chain's tip: when it is higher, when the tip it replaces lost its
// vouching or is far above it, or when it is a sibling at the same height
// that a remote reported after the tip (a reorg). h.mu must be held.
func (p *Pool) moveTip(now time.Time) {
	h := &p.heads
	var cand *headReport
	for _, r := range p.remotes {
		v := r.ht.vouched
		if v == nil || !r.healthy(now) {
			continue
		}
		if cand == nil || v.Number > cand.Number || v.Number == cand.Number && v.Seen.After(cand.Seen) {
			cand = v
		}
	}
	tip := h.tip
	switch {
	case cand == nil || cand == tip:
		return
	case tip == nil, h.revoked, cand.Number > tip.Number, tip.Number-cand.Number > maxHeadStepBack:
	case cand.Number == tip.Number && cand.Hash != tip.Hash && cand.Seen.After(tip.Seen):
		p.log.Info("chain tip replaced at the same height", "head", cand.Number, "hash", cand.Hash)
	default:
		return
	}
	h.revoked = false
	h.tip = cand
	p.tip.Store(cand)
	if tip != nil && tip.Number == cand.Number && tip.Hash == cand.Hash {
		return // the same block, reported by another remote
	}
	p.best.Store(cand.Number)
	h.clock.tip(cand.Number, cand.Time)
	if d, fastest, ok := h.clock.estimate(); ok {
		p.setLearned(d, fastest)
	}
	close(h.wake)
	h.wake = make(chan struct{})
}

// setLearned records the block time the timestamps say, and the fastest
// pace they showed. When the block time moves the poll interval by more
// than a fifth, the trackers are told, so that a remote polled every 12 s
// by default moves to the chain's pace at once. h.mu must be held.
func (p *Pool) setLearned(d, fastest time.Duration) {
	p.fastest.Store(int64(fastest))
	old := time.Duration(p.learned.Swap(int64(d)))
	if p.cfg.BlockTime > 0 || old != 0 && d >= old*4/5 && d <= old*5/4 {
		return
	}
	close(p.heads.retime)
	p.heads.retime = make(chan struct{})
}

// judgingBlockTime is the block time plausible judges by: the fastest
// pace the timestamps showed (a chain that makes blocks in bursts must not
// look like it lies in each), or, until they have, minBlockTime, which
// lets through all but the grossest jumps.
func (p *Pool) judgingBlockTime() time.Duration {
	if d := time.Duration(p.fastest.Load()); d > 0 {
		return d
	}
	return minBlockTime
}

// Block time sources, as HeadStatus reports them.
const (
	BlockTimeConfig  = "config"
	BlockTimeLearned = "learned"
	BlockTimeDefault = "default"
)

// BlockTime is the chain's block time: block_time from config when set,
// else what the block timestamps say, else DefaultBlockTime until they
// have said. Heads are polled at this cadence.
func (p *Pool) BlockTime() time.Duration {
	d, _ := p.blockTime()
	return d
}

func (p *Pool) blockTime() (time.Duration, string) {
	if p.cfg.BlockTime > 0 {
		return p.cfg.BlockTime, BlockTimeConfig
	}
	if d := time.Duration(p.learned.Load()); d > 0 {
		return d, BlockTimeLearned
	}
	return DefaultBlockTime, BlockTimeDefault
}

// Tip is the chain's head block: its number and hash ("" before the
// first head).
func (p *Pool) Tip() (uint64, string) {
	t := p.tip.Load()
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
func (p *Pool) HeadStatus() HeadStatus {
	bt, src := p.blockTime()
	s := HeadStatus{BlockTime: bt, BlockTimeSource: src, PollInterval: p.pollInterval()}
	if t := p.tip.Load(); t != nil {
		s.Number, s.Hash, s.Time = t.Number, t.Hash, time.Unix(int64(min(t.Time, 1<<62)), 0)
	}
	return s
}

// pollInterval is how often a remote's head is polled.
func (p *Pool) pollInterval() time.Duration { return p.BlockTime() }

// pollCadence is the poll interval and a channel closed when it next
// moves.
func (p *Pool) pollCadence() (time.Duration, <-chan struct{}) {
	p.heads.mu.Lock()
	ch := p.heads.retime
	p.heads.mu.Unlock()
	return p.pollInterval(), ch
}

// learnBlockTime fetches, at the first head, the block blockTimeBootstrap
// below it, so that the block time is known at once rather than after a
// few blocks. While the timestamps have not told it, it tries again at a
// later head, at most every bootstrapRetry.
func (p *Pool) learnBlockTime(ctx context.Context) {
	var last time.Time
	for {
		wake := p.HeadChanged()
		if tip := p.tip.Load(); tip != nil && tip.Number > 1 && p.learned.Load() == 0 &&
			(last.IsZero() || time.Since(last) >= bootstrapRetry) {
			last = time.Now()
			p.bootstrapBlockTime(ctx, tip)
			p.bootstraps.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// bootstrapRetry spaces the fetches of an older block that failed.
const bootstrapRetry = time.Minute

func (p *Pool) bootstrapBlockTime(ctx context.Context, tip *headReport) {
	// Not genesis: its timestamp is often made up.
	below := tip.Number - min(tip.Number-1, blockTimeBootstrap)
	// Asked of the remotes that have the block, directly, the tip's
	// reporter first: a client call's votes and hedges have no business
	// here.
	var from []*Remote
	now := p.now()
	p.heads.mu.Lock()
	for _, r := range p.remotes {
		if v := r.ht.vouched; v != nil && v.Number >= below && r.available(now) {
			if v == tip {
				from = append([]*Remote{r}, from...)
			} else {
				from = append(from, r)
			}
		}
	}
	p.heads.mu.Unlock()
	for _, r := range from {
		old, err := r.blockAt(ctx, below)
		if err != nil || old.Time > tip.Time {
			p.log.Debug("block time: older block unusable", "remote", r.Name(), "number", below, "err", err)
			continue
		}
		h := &p.heads
		h.mu.Lock()
		h.clock.below(old.Number, old.Time)
		d, fastest, ok := h.clock.estimate()
		if ok {
			p.setLearned(d, fastest)
		}
		h.mu.Unlock()
		if ok {
			p.log.Info("block time learned from block timestamps", "block_time", d, "poll_interval", p.pollInterval())
			p.headChanged() // judge again by the block time now known
		}
		return
	}
}

// blockAt fetches block n's header fields from the remote.
func (r *Remote) blockAt(ctx context.Context, n uint64) (*headReport, error) {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	res, err := r.call(ctx, "eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`))
	if err != nil {
		return nil, err
	}
	if isNull(res) {
		return nil, fmt.Errorf("block %d: null", n)
	}
	b, err := parseHeadReport(res)
	if err != nil {
		return nil, err
	}
	if b.Number != n {
		return nil, fmt.Errorf("block %d: got %d", n, b.Number)
	}
	return b, nil
}

// blockClock learns the block time from the timestamps of the chain's
// heads: the median of the intervals between them, each measured over at
// least blockTimeMinSpan seconds so that one-second timestamps resolve
// sub-second blocks, and a median so that one halt or burst does not move
// it.
type blockClock struct {
	samples []blockSample // ascending by number
}

type blockSample struct{ number, time uint64 }

// tip records the chain's new tip. Samples at or above it belong to a
// view the chain left (a reorg, a head that healed down); a tip older than
// the samples below it starts over.
func (c *blockClock) tip(number, ts uint64) {
	i := len(c.samples)
	for i > 0 && c.samples[i-1].number >= number {
		i--
	}
	c.samples = c.samples[:i]
	if i > 0 && c.samples[i-1].time > ts {
		c.samples = c.samples[:0]
	}
	c.samples = append(c.samples, blockSample{number, ts})
	if n := len(c.samples); n > blockTimeSamples {
		c.samples = slices.Delete(c.samples, 0, n-blockTimeSamples)
	}
}

// below records an older block's timestamp, below every sample; one that
// does not fit their order is ignored.
func (c *blockClock) below(number, ts uint64) {
	if len(c.samples) == 0 || c.samples[0].number <= number || c.samples[0].time < ts {
		return
	}
	c.samples = slices.Insert(c.samples, 0, blockSample{number, ts})
}

// estimate is the block time the samples say, and the shortest of the
// intervals it is the median of; ok is false until they span
// blockTimeMinSpan seconds.
func (c *blockClock) estimate() (median, fastest time.Duration, ok bool) {
	var ivs []time.Duration
	for i, j := 0, 1; j < len(c.samples); j++ {
		a, b := c.samples[i], c.samples[j]
		if b.time-a.time < blockTimeMinSpan {
			continue
		}
		ivs = append(ivs, time.Duration(b.time-a.time)*time.Second/time.Duration(b.number-a.number))
		i = j
	}
	if len(ivs) == 0 {
		return 0, 0, false
	}
	slices.Sort(ivs)
	return max(ivs[len(ivs)/2], minBlockTime), max(ivs[0], minBlockTime), true
}

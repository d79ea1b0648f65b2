package heads

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
// The block time the heads are judged and polled by is learned from their
// timestamps (Clock); block_time in config overrides it for the polling
// cadence.

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Member is one remote as a Tracker judges its heads; the pool's remotes
// are members.
type Member interface {
	// Judgement is the tracker's record of the member's heads, guarded
	// by the tracker's lock.
	Judgement() *Judgement
	// Claim is the latest head the member reported, corroborated or not;
	// nil before the first.
	Claim() *Report
	// Verified reports whether its chain id was checked and is the
	// chain's; OffChain, whether a check found it on another chain.
	Verified() bool
	OffChain() bool
	// Healthy reports whether it is in rotation at now.
	Healthy(now time.Time) bool
	// Vouch sets the member's head: the number of its highest
	// corroborated report, 0 when none is.
	Vouch(n uint64)
	// Logger is the member's log.
	Logger() *slog.Logger
}

// Judgement is a Tracker's view of one member's heads, guarded by the
// tracker's lock.
type Judgement struct {
	Vouched *Report // its highest corroborated report; nil: none
	// alone: Vouched was taken only because no other remote could
	// witness it; it is judged again once one can.
	alone     bool
	Held      *Report // the first report nothing corroborated, while that lasts
	heldSince time.Time
	// noted is the claim the last round saw: a new one is news for
	// ClaimsChanged.
	noted *Report
}

// Carried is j for a member that replaces the one j was of, at the same
// endpoint: its claim is news again.
func (j Judgement) Carried() Judgement {
	j.noted = nil
	return j
}

// Held is a report that began to be held, for the log and the
// misbehaviour record after the tracker's lock is released.
type Held struct {
	By       Member
	Claim    *Report
	Tip      uint64 // the chain's head then
	Evidence bool   // another remote's head contradicts it
}

// Gauge is a series the tracker keeps true (a prometheus.Gauge).
type Gauge interface{ Set(float64) }

// Block time sources, as Tracker.BlockTime reports them.
const (
	SourceConfig  = "config"
	SourceLearned = "learned"
	SourceDefault = "default"
)

// Tracker is a chain's tip, judged from every member's reports, and its
// block time, learned from the tip's timestamps. Init it before use.
type Tracker struct {
	mu      sync.Mutex
	tip     *Report // the chain's head: the highest vouched report
	tipBy   Member  // the member whose report tip is
	revoked bool    // the tip's report lost its vouching: pick again
	clock   Clock
	wake    chan struct{} // closed and replaced when the tip moves
	retime  chan struct{} // closed and replaced when the poll interval moves, or Retrack
	claims  chan struct{} // closed and replaced when a member reports a new head

	// best is the tip's number and cur the tip, read without mu; learned
	// is the block time its timestamps say and fastest the fastest pace
	// they showed (nanoseconds; 0 until known).
	best    atomic.Uint64
	cur     atomic.Pointer[Report]
	canon   atomic.Pointer[Chain] // the recent canonical hashes
	learned atomic.Int64
	fastest atomic.Int64

	log        *slog.Logger
	fixed      func() time.Duration // block_time from config; 0: none
	byDefault  time.Duration        // the block time until the timestamps tell
	blockTimeG Gauge                // the block time BlockTime gives, in seconds
}

// Init readies t: fixed is block_time from config (0: none), byDefault
// the block time assumed until the timestamps tell, g the series of the
// block time.
func (t *Tracker) Init(log *slog.Logger, fixed func() time.Duration, byDefault time.Duration, g Gauge) {
	t.log, t.fixed, t.byDefault, t.blockTimeG = log, fixed, byDefault, g
	t.wake, t.retime, t.claims = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

// Lock and Unlock guard the members' Judgements.
func (t *Tracker) Lock()   { t.mu.Lock() }
func (t *Tracker) Unlock() { t.mu.Unlock() }

// Round judges every member's latest report and moves the chain's tip. It
// reports the reports that began to be held; maxLag is how far behind the
// chain's head a member may be and stay in rotation.
func (t *Tracker) Round(ms []Member, now time.Time, maxLag uint64) []Held {
	var held []Held
	t.mu.Lock()
	defer t.mu.Unlock()
	bt := t.judgingBlockTime()
	for _, m := range ms {
		if hh, ok := t.judge(ms, m, now, bt, maxLag); ok {
			held = append(held, hh)
		}
	}
	t.moveTip(ms, now)
	t.noteClaims(ms)
	return held
}

// Judge judges m's latest report against ms, the members, and moves no
// tip: m is a replacement waiting to be one. A held report is not
// reported: m is not followed yet.
func (t *Tracker) Judge(ms []Member, m Member, now time.Time, maxLag uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.judge(ms, m, now, t.judgingBlockTime(), maxLag)
}

// judge decides whether m's latest report is corroborated. It reports a
// report that begins to be held. t.mu must be held.
func (t *Tracker) judge(ms []Member, m Member, now time.Time, bt time.Duration, maxLag uint64) (Held, bool) {
	c := m.Claim()
	j := m.Judgement()
	if c == nil || !m.Verified() {
		return Held{}, false
	}
	if c == j.Vouched {
		if j.alone && contradicted(ms, m, c, now, bt, maxLag) {
			// Taken while nothing could witness it; now something does,
			// and it cannot be.
			j.Vouched, j.alone = nil, false
			m.Vouch(0)
			if t.tip == c {
				t.revoked = true
			}
			j.Held, j.heldSince = c, now
			return Held{By: m, Claim: c, Tip: t.best.Load(), Evidence: true}, true
		}
		return Held{}, false
	}
	ok, alone := t.corroborate(ms, m, c, now, bt, maxLag)
	if ok {
		if j.Held != nil {
			m.Logger().Info("remote's head corroborated", "head", c.Number)
		}
		j.Vouched, j.alone, j.Held = c, alone, nil
		m.Vouch(c.Number)
		return Held{}, false
	}
	if j.Held != nil && c.Number >= j.Held.Number {
		return Held{}, false // still held: logged once
	}
	j.Held, j.heldSince = c, now
	return Held{By: m, Claim: c, Tip: t.best.Load(), Evidence: witnesses(ms, m, now) > 0}, true
}

// corroborate reports whether something vouches for report c of m: its
// parent is a block the tracker vouched for; another member's head reaches
// within max_lag of it; or it is within what the timestamps and the block
// time allow since the chain's tip (at the start, since every other
// member's report). alone: only because no other member could witness it.
func (t *Tracker) corroborate(ms []Member, m Member, c *Report, now time.Time, bt time.Duration, maxLag uint64) (ok, alone bool) {
	if c.Time > uint64(now.Add(MaxClockSkew).Unix()) {
		return false, false // a block from the future
	}
	tip := t.tip
	if tip != nil && c.Number == tip.Number+1 && c.Parent == tip.Hash {
		return true, false
	}
	tol := max(maxLag, Slack)
	others, witnesses, plausibleToAll := 0, 0, true
	for _, o := range ms {
		if o == m || !o.Healthy(now) {
			continue
		}
		others++
		if v := o.Judgement().Vouched; v != nil && v.Number+1 == c.Number && v.Hash == c.Parent {
			return true, false
		}
		oc := o.Claim()
		if oc == nil {
			continue
		}
		witnesses++
		if oc.Number+tol >= c.Number {
			return true, false
		}
		plausibleToAll = plausibleToAll && Plausible(c, oc, bt)
	}
	switch {
	case tip != nil && Plausible(c, tip, bt):
		return true, false
	case tip == nil && others == 0:
		return true, true
	case tip == nil && witnesses == others && plausibleToAll:
		return true, false
	}
	// Nothing vouches for it and nothing contradicts it: a member alone
	// that has stood by it long enough is followed.
	j := m.Judgement()
	if witnesses == 0 && j.Held != nil && c.Number >= j.Held.Number && now.Sub(j.heldSince) >= HoldFor {
		return true, true
	}
	return false, false
}

// contradicted reports whether another member's report shows c cannot be
// the chain's head.
func contradicted(ms []Member, m Member, c *Report, now time.Time, bt time.Duration, maxLag uint64) bool {
	tol := max(maxLag, Slack)
	against := false
	for _, o := range ms {
		if o == m || !o.Healthy(now) {
			continue
		}
		oc := o.Claim()
		switch {
		case oc == nil:
		case oc.Number+tol >= c.Number:
			return false // confirmed
		case !Plausible(c, oc, bt):
			against = true
		}
	}
	return against
}

// witnesses counts the other members in rotation that reported a head.
func witnesses(ms []Member, m Member, now time.Time) int {
	n := 0
	for _, o := range ms {
		if o != m && o.Healthy(now) && o.Claim() != nil {
			n++
		}
	}
	return n
}

// moveTip makes the highest vouched report among the members in rotation
// the chain's tip: when it is higher, when the tip it replaces lost its
// vouching or is far above it, or when it is a sibling at the same height
// that a member reported after the tip (a reorg). t.mu must be held.
func (t *Tracker) moveTip(ms []Member, now time.Time) {
	if t.tipBy != nil && t.tipBy.OffChain() {
		// Its reporter was found on another chain: the tip is another
		// network's block (remotes.Heads.CheckTipChain).
		t.revoked = true
	}
	var cand *Report
	var by Member
	for _, m := range ms {
		v := m.Judgement().Vouched
		if v == nil || !m.Healthy(now) {
			continue
		}
		if cand == nil || v.Number > cand.Number || v.Number == cand.Number && v.Seen.After(cand.Seen) {
			cand, by = v, m
		}
	}
	tip := t.tip
	switch {
	case cand == nil || cand == tip:
		return
	case tip == nil, t.revoked, cand.Number > tip.Number, tip.Number-cand.Number > MaxStepBack:
	case cand.Number == tip.Number && cand.Hash != tip.Hash && cand.Seen.After(tip.Seen):
		t.log.Info("chain tip replaced at the same height", "head", cand.Number, "hash", cand.Hash)
	default:
		return
	}
	t.revoked = false
	t.tip, t.tipBy = cand, by
	t.cur.Store(cand)
	t.canon.Store(t.canon.Load().Extend(cand))
	if tip != nil && tip.Number == cand.Number && tip.Hash == cand.Hash {
		return // the same block, reported by another member
	}
	t.best.Store(cand.Number)
	t.clock.Tip(cand.Number, cand.Time)
	if d, fastest, ok := t.clock.Estimate(); ok {
		t.setLearned(d, fastest)
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

// noteClaims closes the claims channel when a member's claim changed
// since the last look. t.mu must be held.
func (t *Tracker) noteClaims(ms []Member) {
	news := false
	for _, m := range ms {
		j := m.Judgement()
		if c := m.Claim(); c != j.noted {
			j.noted, news = c, true
		}
	}
	if news {
		close(t.claims)
		t.claims = make(chan struct{})
	}
}

// Head is the number of the chain's tip; 0 before the first.
func (t *Tracker) Head() uint64 { return t.best.Load() }

// Tip is the chain's tip; nil before the first.
func (t *Tracker) Tip() *Report { return t.cur.Load() }

// HashAt is the hash of canonical block n: the tip, its parent, and
// blocks below that the tips that led to it linked (Chain); ok is false
// for any other number.
func (t *Tracker) HashAt(n uint64) (string, bool) { return t.canon.Load().At(n) }

// HeadChanged returns a channel closed when the tip next changes: a new
// head, or a sibling replacing it at the same height.
func (t *Tracker) HeadChanged() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wake
}

// ClaimsChanged returns a channel closed when any member next reports a
// new head (not only a new tip).
func (t *Tracker) ClaimsChanged() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claims
}

// Retimed returns a channel closed when the poll interval next moves, or
// Retrack is called.
func (t *Tracker) Retimed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.retime
}

// Retrack closes the channel Retimed returned, as a new poll interval
// does: whoever waits on it looks again.
func (t *Tracker) Retrack() {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(t.retime)
	t.retime = make(chan struct{})
}

// setLearned records the block time the timestamps say, and the fastest
// pace they showed. When the block time moves the poll interval by more
// than a fifth, Retimed's channel is closed, so that a remote polled every
// 12 s by default moves to the chain's pace at once. t.mu must be held.
func (t *Tracker) setLearned(d, fastest time.Duration) {
	t.fastest.Store(int64(fastest))
	old := time.Duration(t.learned.Swap(int64(d)))
	bt, _ := t.BlockTime()
	t.blockTimeG.Set(bt.Seconds())
	if t.fixed() > 0 || old != 0 && d >= old*4/5 && d <= old*5/4 {
		return
	}
	close(t.retime)
	t.retime = make(chan struct{})
}

// judgingBlockTime is the block time Plausible judges by: the fastest
// pace the timestamps showed (a chain that makes blocks in bursts must not
// look like it lies in each), or, until they have, MinBlockTime, which
// lets through all but the grossest jumps.
func (t *Tracker) judgingBlockTime() time.Duration {
	if d := time.Duration(t.fastest.Load()); d > 0 {
		return d
	}
	return MinBlockTime
}

// BlockTime is the chain's block time and where it comes from: block_time
// from config when set (SourceConfig), else what the block timestamps say
// (SourceLearned), else the default until they have said (SourceDefault).
func (t *Tracker) BlockTime() (time.Duration, string) {
	if d := t.fixed(); d > 0 {
		return d, SourceConfig
	}
	if d := time.Duration(t.learned.Load()); d > 0 {
		return d, SourceLearned
	}
	return t.byDefault, SourceDefault
}

// Learned is the block time the timestamps said; 0 until they have.
func (t *Tracker) Learned() time.Duration { return time.Duration(t.learned.Load()) }

// Below records an older block's timestamp (fetched so that the block
// time is known at once) and reports the block time the timestamps now
// say, if they do.
func (t *Tracker) Below(number, ts uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clock.Below(number, ts)
	d, fastest, ok := t.clock.Estimate()
	if ok {
		t.setLearned(d, fastest)
	}
	return d, ok
}

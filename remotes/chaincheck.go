package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/wire"
)

// A remote's chain id is not a fact learnt once: a provider re-points an
// endpoint at another network, a load balancer fails over to a node of
// another chain, a self-hosted node is restarted with another genesis. The
// remote then answers every call well, with another chain's blocks, and
// nothing but eth_chainId tells. So the chain id is asked again:
//
//   - every ChainRecheck (one eth_chainId, cheap), whatever the last answer;
//   - at once, and before the remote is used again, when its breaker
//     opened: it was down, and what comes back may not be what left;
//   - at once when its newHeads stream reconnects (the heads of the new
//     stream are ignored until the check passes), when its WebSocket call
//     connection is dialled again, and when its head jumps further than a
//     reorg or a lagging backend explains (heads.MaxStepBack), the usual sign
//     of a switch. The remote stays in rotation meanwhile: taking it out
//     for every reconnect would fail the calls of a chain with one remote.
//
// A remote found on another chain leaves rotation at once (healthy() is
// false), the answer of one of its calls still in flight is dropped (the
// pool fails it over), and a switch logs once, loudly. It comes back only after
// a later check reports the right chain.

// DefaultChainRecheck is how often a remote's chain id is asked again.
const DefaultChainRecheck = time.Minute

// Chain check timings.
const (
	// chainRetryEvery: a remote whose chain is not known (never checked,
	// or unsure after an outage) is asked this often until it answers.
	chainRetryEvery = 2 * time.Second
	// headJumpRecheckMin spaces the checks a jumping head asks for: a
	// remote catching up after a sync jumps at every poll.
	headJumpRecheckMin = 10 * time.Second
)

// chainStale: the remote was on the right chain, but may not be any more
// (its breaker opened, its connection was dialled again); it is out of
// rotation until a check says the right chain.
const chainStale int32 = 2

// errWrongChain drops the answer of a call that returned after its remote
// was found on another chain (dropForeign). It is a local limit: nothing usable
// was received, and the pool tries another remote.
var errWrongChain = fmt.Errorf("answer dropped, remote found on another chain: %w", errLocalLimit)

// chainCheckMetrics are the chain checks' series.
type chainCheckMetrics struct {
	checks *prometheus.CounterVec // chain, remote, outcome
	wrong  *prometheus.GaugeVec   // chain, remote
}

func newChainCheckMetrics(reg prometheus.Registerer) *chainCheckMetrics {
	m := &chainCheckMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "chain_checks_total",
			Help: "eth_chainId checks of a remote, by outcome: ok, wrong (another chain: out of rotation), failed (no usable answer)."},
			[]string{"chain", "remote", "outcome"}),
		wrong: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "wrong_chain",
			Help: "1 while a remote's last chain id check found it on another chain."}, []string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.checks, m.wrong)
	}
	return m
}

// chainCheck is a remote's chain re-check state.
type chainCheck struct {
	kick      chan struct{} // buffered 1: track checks at once
	due       atomic.Bool   // a check is asked for (recheckSoon)
	headsHeld atomic.Bool   // the heads stream reconnected: its heads wait for a check
	at        atomic.Int64  // unix nanos of the last check answered (right or wrong)
	every     atomic.Int64  // ChainRecheck, in nanoseconds; a reload sets it

	ok, wrong, failed prometheus.Counter
	wrongGauge        prometheus.Gauge
}

func (c *chainCheck) init(m *remoteMetrics) {
	c.kick = make(chan struct{}, 1)
	c.every.Store(int64(DefaultChainRecheck))
	cm := m.m.cc
	c.ok = cm.checks.WithLabelValues(m.chain, m.remote, "ok")
	c.wrong = cm.checks.WithLabelValues(m.chain, m.remote, "wrong")
	c.failed = cm.checks.WithLabelValues(m.chain, m.remote, "failed")
	c.wrongGauge = cm.wrong.WithLabelValues(m.chain, m.remote)
}

// wake asks track for a check now; it never blocks.
func (c *chainCheck) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// chainUnsure takes a remote on the right chain out of rotation until its
// chain id is checked again, and asks for that check now.
func (r *Remote) chainUnsure(why string) {
	if r.chainState.CompareAndSwap(chainOK, chainStale) {
		r.log.Info("remote chain id to be checked again before use", "why", why)
		r.m.healthy.Set(0)
	}
	r.cc.wake()
}

// recheckSoon asks for a check now, the remote staying in rotation.
func (r *Remote) recheckSoon() {
	r.cc.due.Store(true)
	r.cc.wake()
}

// headsReconnected holds the heads of a new newHeads stream until the chain
// id is checked again.
func (r *Remote) headsReconnected() {
	r.cc.headsHeld.Store(true)
	r.cc.wake()
}

// headsTrusted reports whether heads from the newHeads stream may be used.
func (r *Remote) headsTrusted() bool {
	return r.chainVerified() && !r.cc.headsHeld.Load()
}

// headMoved asks for a check when the head moved from old further than a
// reorg or a lagging backend explains, in either direction.
func (r *Remote) headMoved(old uint64) {
	n := r.claimedHead()
	if old == 0 || n == old {
		return
	}
	if d := max(n, old) - min(n, old); d <= heads.MaxStepBack {
		return
	}
	if r.now().UnixNano()-r.cc.at.Load() < int64(headJumpRecheckMin) {
		return
	}
	r.log.Debug("remote head jumped: chain id to be checked", "from", old, "to", n)
	r.recheckSoon()
}

// chainCheckDue reports whether track must ask the chain id now.
func (r *Remote) chainCheckDue() bool {
	switch r.chainState.Load() {
	case chainUnknown, chainStale:
		return true
	}
	if r.cc.due.Load() || r.cc.headsHeld.Load() {
		return true
	}
	return r.now().UnixNano()-r.cc.at.Load() >= r.cc.every.Load()
}

// chainRetry is the wait before the next check when the last one left the
// chain unknown: brisk until the remote answers, then ChainRecheck.
func (r *Remote) chainRetry(every time.Duration) (time.Duration, bool) {
	switch r.chainState.Load() {
	case chainUnknown:
		return min(every, chainRetryEvery), true
	case chainStale:
		// Out of rotation after its breaker opened: asked as often as
		// the breaker would let a probe through, so the check does not
		// hold it out longer than its cooldown.
		return min(every, chainRetryEvery, r.brk.Cooldown()), true
	}
	if r.cc.due.Load() || r.cc.headsHeld.Load() {
		return min(every, chainRetryEvery), true
	}
	return 0, false
}

// chainChecked records the answer of a check: got is the remote's chain id.
// It reports whether the remote is on the chain.
func (r *Remote) chainChecked(want, got uint64) bool {
	r.cc.at.Store(r.now().UnixNano())
	r.cc.due.Store(false)
	if got != want {
		r.cc.wrong.Inc()
		old := r.chainState.Swap(chainWrong)
		switch old {
		case chainWrong:
		case chainUnknown:
			r.log.Error("REMOTE IS ON THE WRONG CHAIN: it will not be used",
				"want_chain_id", want, "got_chain_id", got, "recheck_every", time.Duration(r.cc.every.Load()))
		default:
			r.log.Error("REMOTE SWITCHED TO ANOTHER CHAIN: out of rotation until it is back",
				"want_chain_id", want, "got_chain_id", got, "recheck_every", time.Duration(r.cc.every.Load()))
		}
		r.m.healthy.Set(0)
		r.cc.wrongGauge.Set(1)
		r.last.Store(&lastError{text: fmt.Sprintf("answers chain id %d, not %d", got, want), kind: wire.FailWrongChain, at: r.now()})
		if old != chainWrong && r.distrust != nil {
			// Its answers since its last good check may be the other
			// chain's (distrust.go).
			r.distrust(DistrustWrongChain)
		}
		return false
	}
	r.cc.ok.Inc()
	r.cc.headsHeld.Store(false)
	switch old := r.chainState.Swap(chainOK); old {
	case chainUnknown:
		r.log.Info("remote chain id verified", "chain_id", got)
	case chainWrong:
		r.log.Warn("remote is on the right chain again: back in rotation", "chain_id", got)
	}
	r.cc.wrongGauge.Set(0)
	r.checkPassed(r.now())
	return true
}

// chainCheckFailed records a check that got no usable answer.
func (r *Remote) chainCheckFailed() { r.cc.failed.Inc() }

// dropForeign turns the answer of a call that returned after its remote
// was found on another chain into errWrongChain: the pool fails it over.
func (r *Remote) dropForeign(res json.RawMessage, err error) (json.RawMessage, error) {
	if err == nil && r.chainState.Load() == chainWrong {
		return nil, fmt.Errorf("remote %s: %w", r.cfg.Name, errWrongChain)
	}
	return res, err
}

// CheckTipChain asks at once the chain id of every remote whose head is
// one of the blocks hashes, or a child of one (the head it reports, or the
// one the pool took from it), each out of rotation until its check passes,
// and reports whether every one passed. The leader asks it when a reorg
// found no ancestor in the head window: the usual sign of a remote
// re-pointed at another network, whose blocks are siblings of the chain's
// at every height. A remote found on another chain leaves rotation, and
// the chain's tip, when it was that remote's, is picked again among the
// others. When no remote has such a head any more (it moved on), every
// remote on the chain is asked, staying in rotation meanwhile: none may be
// left out, or the branch's reporter would pass unasked.
func (h *Heads) CheckTipChain(ctx context.Context, hashes ...string) bool {
	p := h.p
	var doubted []*Remote
	h.t.Lock()
	for _, r := range p.members() {
		c, v := r.claim.Load(), r.ht.Vouched
		for _, h := range hashes {
			if c != nil && (strings.EqualFold(c.Hash, h) || strings.EqualFold(c.Parent, h)) ||
				v != nil && strings.EqualFold(v.Hash, h) {
				doubted = append(doubted, r)
				break
			}
		}
	}
	h.t.Unlock()
	unsure := len(doubted) > 0
	if !unsure {
		// Their heads moved on past the blocks named: every remote is
		// asked, each staying in rotation unless found elsewhere, so that
		// the chain keeps its remotes for the round trip.
		for _, r := range p.members() {
			if r.chainVerified() {
				doubted = append(doubted, r)
			}
		}
	}
	want := p.conf().ChainID
	results := make([]bool, len(doubted))
	var wg sync.WaitGroup
	for i, r := range doubted {
		if unsure {
			r.chainUnsure("its head has no ancestor in the head window")
		}
		wg.Go(func() { results[i] = r.verifyChain(ctx, want) })
	}
	wg.Wait()
	h.changed()
	for _, ok := range results {
		if !ok {
			return false
		}
	}
	return true
}

// confirmRemotes bounds the remotes ConfirmHash asks.
const confirmRemotes = 3

// ConfirmHash asks remotes in rotation, each a different one, for the hash
// of block n, until two agree with hash and none disagrees, or
// confirmRemotes were asked. It reports how many answered hash and how
// many another block; a remote without the block, or failing, counts
// neither. Two remotes agreeing means at least one other than the remote
// that served a block confirms it: what the history write-through asks
// before it stores a block that links to nothing the cluster holds.
func (h *Heads) ConfirmHash(ctx context.Context, n uint64, hash string) (agree, disagree int) {
	p := h.p
	ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
	defer cancel()
	const method = "eth_getBlockByNumber"
	params := json.RawMessage(`["` + evm.Quantity(n) + `",false]`)
	a := p.newAttempt(method, params, route{need: n, nullIsMissing: true})
	for range confirmRemotes {
		r, idx := p.pick(method, a.rt, a.tried)
		if r == nil || ctx.Err() != nil {
			break
		}
		a.sent(idx)
		j := a.call(ctx, r, idx, false)
		if j.mean != meanAnswer {
			continue // no block, or no answer: neither
		}
		var got string
		if json.Unmarshal(jsonscan.Member(j.res, "hash"), &got) != nil {
			continue
		}
		if strings.EqualFold(got, hash) {
			agree++
		} else {
			disagree++
		}
		if agree >= 2 && disagree == 0 {
			break
		}
	}
	return agree, disagree
}

// claimedHead is the number of the latest head the remote reported,
// corroborated or not: a chain switch shows in what it claims.
func (r *Remote) claimedHead() uint64 {
	if c := r.claim.Load(); c != nil {
		return c.Number
	}
	return 0
}

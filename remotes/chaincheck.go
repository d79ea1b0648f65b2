package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/wire"
)

// A remote's chain id is asked again (remotes/health: when, and what an
// answer means); a remote found on another chain leaves rotation, and the
// answer of one of its calls still in flight is dropped.

// errWrongChain drops the answer of a call that returned after its remote
// was found on another chain (dropForeign). It is a local limit: nothing usable
// was received, and the pool tries another remote.
var errWrongChain = fmt.Errorf("answer dropped, remote found on another chain: %w", errLocalLimit)

// initChainCheck readies the remote's chain check (health.Check) with its
// series.
func (r *Remote) initChainCheck(m *remoteMetrics) {
	cm := m.m.cc
	r.cc.Init(r.log, cm.checks.WithLabelValues(m.chain, m.remote, "ok"),
		cm.checks.WithLabelValues(m.chain, m.remote, "wrong"),
		cm.checks.WithLabelValues(m.chain, m.remote, "failed"), cm.wrong.WithLabelValues(m.chain, m.remote))
}

// chainUnsure takes a remote on the right chain out of rotation until its
// chain id is checked again, and asks for that check now.
func (r *Remote) chainUnsure(why string) {
	if r.cc.Unsure(why) {
		r.m.healthy.Set(0)
	}
}

// chainChecked records the answer of a check: got is the remote's chain id.
// It reports whether the remote is on the chain.
func (r *Remote) chainChecked(want, got uint64) bool {
	was, ok := r.cc.Checked(want, got, r.now())
	if !ok {
		r.m.healthy.Set(0)
		r.last.Store(&lastError{text: fmt.Sprintf("answers chain id %d, not %d", got, want), kind: wire.FailWrongChain, at: r.now()})
		if was != health.Wrong && r.distrust != nil {
			// Its answers since its last good check may be the other
			// chain's (distrust.go).
			r.distrust(DistrustWrongChain)
		}
		return false
	}
	r.checkPassed(r.now())
	return true
}

// dropForeign turns the answer of a call that returned after its remote
// was found on another chain into errWrongChain: the pool fails it over.
func (r *Remote) dropForeign(res json.RawMessage, err error) (json.RawMessage, error) {
	if err == nil && r.cc.State() == health.Wrong {
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

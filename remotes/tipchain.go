package remotes

// The chain's recent canonical hashes, as the pool's tip says them: the
// tip, its parent, and below them the hashes of earlier tips for as long
// as each links to the one above by its parent hash. A reorg that moves
// the tip to another branch cuts what no longer links. The head window's
// freshness is judged by them (HashAt): a window whose head is not the
// block the remotes in rotation have at that height holds an orphan.

import (
	"context"
	"strings"
	"sync"
	"time"
)

// HashAt is the hash of canonical block n as the remotes in rotation have
// it: the chain's tip, its parent, and blocks below that the tips that
// led to it linked (heads.Chain); ok is false for any other number.
func (h *Heads) HashAt(n uint64) (string, bool) { return h.t.HashAt(n) }

// Reports reports whether a remote in rotation reports block n as hash:
// its latest head is that block, or that block's child. A window whose
// head the tip's run of hashes disagrees with still answers while one
// does: a remote re-pointed at another network makes its siblings the
// tip until it is found out, and the window, right all along, must not
// send every call to the remotes, that remote among them, meanwhile.
func (h *Heads) Reports(n uint64, hash string) bool {
	p := h.p
	now := p.now()
	for _, r := range p.members() {
		c := r.claim.Load()
		if c == nil || !(c.Number == n && strings.EqualFold(c.Hash, hash) || c.Number == n+1 && strings.EqualFold(c.Parent, hash)) {
			continue
		}
		if r.healthy(now) {
			return true
		}
	}
	return false
}

// HeardWithin reports whether a remote in rotation reported its head,
// news or not (a poll, newHeads, or the cluster's feed), within d before
// now, once the pool judged that report; never while the pool's heads may
// be old news after a stall (heads.Stalls). Heads older than the chain's block
// time allows, with nothing heard since, say nothing of the chain now: the
// process was paused, or every remote fell silent. now is the caller's
// clock, read once for all its judgements.
func (h *Heads) HeardWithin(now time.Time, d time.Duration) bool {
	p := h.p
	if h.stall.Stalled(now) {
		return false
	}
	since := now.Add(-d).UnixNano()
	for _, r := range p.members() {
		if r.heardAt.Load() >= since && r.healthy(now) {
			return true
		}
	}
	return false
}

// repoll polls every remote on the chain once, at once, and judges the
// heads: the stall watch's (heads.Stalls) after a stall.
func (h *Heads) repoll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range h.p.members() {
		if !r.chainVerified() {
			continue
		}
		wg.Go(func() { r.poll(ctx, func() {}) })
	}
	wg.Wait()
	h.changed()
}

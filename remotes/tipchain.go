package remotes

// The chain's recent canonical hashes, as the pool's tip says them: the
// tip, its parent, and below them the hashes of earlier tips for as long
// as each links to the one above by its parent hash. A reorg that moves
// the tip to another branch cuts what no longer links. The head window's
// freshness is judged by them (HashAt): a window whose head is not the
// block the remotes in rotation have at that height holds an orphan.

import (
	"strings"
	"time"
)

// tipChainLen bounds the hashes kept: more than any max_lag a window may
// trail by and still answer.
const tipChainLen = 64

// tipChain is an immutable run of canonical hashes: hashes[i] is block
// top-i's.
type tipChain struct {
	top    uint64
	hashes []string
}

// at is block n's hash; ok is false for a number the run does not hold.
func (c *tipChain) at(n uint64) (string, bool) {
	if c == nil || n > c.top || c.top-n >= uint64(len(c.hashes)) {
		return "", false
	}
	return c.hashes[c.top-n], true
}

// extend is the run once t is the tip: t and its parent, and below them
// what c holds if it links to t's parent.
func (c *tipChain) extend(t *headReport) *tipChain {
	hs := make([]string, 0, tipChainLen)
	hs = append(hs, t.Hash)
	if t.Number > 0 {
		hs = append(hs, t.Parent)
		if h, ok := c.at(t.Number - 1); ok && h == t.Parent {
			for n := t.Number - 1; n > 0 && len(hs) < tipChainLen; n-- {
				h, ok := c.at(n - 1)
				if !ok {
					break
				}
				hs = append(hs, h)
			}
		}
	}
	return &tipChain{top: t.Number, hashes: hs}
}

// HashAt is the hash of canonical block n as the remotes in rotation have
// it: the chain's tip, its parent, and blocks below that the tips that
// led to it linked (tipChain); ok is false for any other number.
func (h *Heads) HashAt(n uint64) (string, bool) { return h.canon.Load().at(n) }

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
// be old news after a stall (stall.go). Heads older than the chain's block
// time allows, with nothing heard since, say nothing of the chain now: the
// process was paused, or every remote fell silent. now is the caller's
// clock, read once for all its judgements.
func (h *Heads) HeardWithin(now time.Time, d time.Duration) bool {
	p := h.p
	if h.stall.stalled(now) {
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

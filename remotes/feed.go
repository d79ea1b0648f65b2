package remotes

// Heads from the cluster's feed. In a cluster only the chain's leader
// tracks its remotes' heads (polling, newHeads); it publishes them
// (RemoteHeads, ClaimsChanged) and every other replica's pool takes them
// from there (FeedHeads) instead of asking the remotes. A fed remote is
// neither polled nor subscribed to, nor are its chain ids asked again
// every ChainRecheck: the leader does that, and drops from its feed a
// remote it no longer vouches for, which this replica then tracks itself
// again. What a fed remote's calls do here (errors, latency, breaker,
// throttling) is still this replica's own: the feed carries heads only.
// When the feed goes stale, TrackHeads hands every remote back to its own
// trackers at once.

import (
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/remotes/heads"
)

// RemoteHead is one remote's head as the leader's pool saw it, the unit of
// the cluster's head feed. The remote is named, never by its URL.
type RemoteHead struct {
	Remote string `json:"remote"`
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
	Parent string `json:"parent"`
	Time   uint64 `json:"time"` // the block's timestamp, unix seconds
	// Age is how long before the report was taken the remote first
	// reported this head: relative, so replicas' clocks need not agree.
	Age time.Duration `json:"age"`
	// GoodAge is how long before the report the remote's last good check
	// was (distrust.go; 0: not known), relative like Age: a replica fed
	// the remote's heads does not check its chain itself, and finds its
	// last good check here.
	GoodAge time.Duration `json:"good_age,omitempty"`
}

// remoteFeed is a remote's part in the feed.
type remoteFeed struct {
	fed atomic.Bool // its heads come from the feed; its trackers idle
	// busy is set while the poll tracker decides on and makes a poll:
	// once a fed remote's tracker is not busy, no poll decided on before
	// the feed began can land after (the tests wait for that).
	busy atomic.Bool
}

// RemoteHeads reports the head of every remote this pool tracks itself
// and found on the chain, for the leader to publish.
func (h *Heads) RemoteHeads() []RemoteHead {
	p := h.p
	now := p.now()
	var out []RemoteHead
	for _, r := range p.members() {
		c := r.claim.Load()
		if c == nil || !r.chainVerified() || r.feed.fed.Load() {
			continue
		}
		h := RemoteHead{Remote: r.Name(), Number: c.Number, Hash: c.Hash, Parent: c.Parent,
			Time: c.Time, Age: max(now.Sub(c.Seen), 0)}
		if g := r.goodAt.Load(); g != 0 {
			h.GoodAge = max(now.Sub(time.Unix(0, g)), time.Nanosecond)
		}
		out = append(out, h)
	}
	return out
}

// ClaimsChanged returns a channel closed when any remote next reports a
// new head (not only a new tip), so the leader publishes every one.
func (h *Heads) ClaimsChanged() <-chan struct{} { return h.t.ClaimsChanged() }

// FeedHeads takes the remotes' heads from the cluster's feed: each remote
// named in hs is fed from now on, and its head noted; a remote not named
// (the leader does not vouch for it, or does not know it) is tracked by
// this replica. Heads of unknown remotes are ignored.
func (h *Heads) FeedHeads(hs []RemoteHead) {
	p := h.p
	byName := make(map[string]*RemoteHead, len(hs))
	for i := range hs {
		byName[hs[i].Remote] = &hs[i]
	}
	flipped := false
	for _, r := range p.members() {
		h, ok := byName[r.Name()]
		if ok {
			r.noteHead(&heads.Report{Number: h.Number, Hash: h.Hash, Parent: h.Parent, Time: h.Time})
			if h.GoodAge > 0 {
				r.checkPassedAt(p.now(), p.now().Add(-h.GoodAge))
			}
		}
		if r.setFed(ok) {
			flipped = true
			if !ok && len(hs) > 0 {
				// The leader stopped vouching for it: it may be on another
				// chain (the heads it fed may be another network's). Out
				// of rotation until this replica's own check passes.
				r.chainUnsure("the leader's feed no longer vouches for it")
			}
		}
	}
	if flipped {
		h.retrack()
	}
	h.changed()
}

// TrackHeads hands every remote back to its own trackers, which poll (or
// subscribe) at once: the feed went stale, or this replica leads.
func (h *Heads) TrackHeads() {
	p := h.p
	flipped := false
	for _, r := range p.members() {
		flipped = r.setFed(false) || flipped
	}
	if flipped {
		h.retrack()
	}
}

// Fed reports how many of the pool's remotes take their heads from the
// feed.
func (h *Heads) Fed() int {
	p := h.p
	n := 0
	for _, r := range p.members() {
		if r.feed.fed.Load() {
			n++
		}
	}
	return n
}

// retrack wakes every tracker (track, watch) to look at its remote's fed
// flag again, through the channel a new poll cadence closes.
func (h *Heads) retrack() { h.t.Retrack() }

// fed reports whether the remote's heads come from the feed.
func (r *Remote) fed() bool { return r.feed.fed.Load() }

// setFed sets whether the remote is fed and reports whether that changed.
func (r *Remote) setFed(v bool) bool { return r.feed.fed.Swap(v) != v }

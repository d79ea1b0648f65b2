package headstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/venn-gateway/venn/evm"
)

// DefaultWindow is how many blocks below and including the head a chain's
// window keeps.
const DefaultWindow = 128

// errOutOfOrder: an event does not follow the window's sequence number.
var errOutOfOrder = errors.New("headstore: event out of order")

// Window is one replica's in-memory copy of a chain's head window, kept by
// following a Store. Reads take a read lock and return sub-slices of what
// the remotes sent; nothing is re-encoded. The canonical blocks are always
// contiguous and each one's parent is the one below it, so a block that a
// reorg orphaned is gone from every index the moment the reorg applies.
type Window struct {
	size int

	mu        sync.RWMutex
	gen       string
	seq       uint64
	canon     []*evm.Parts // ascending, contiguous, parent-linked
	byHash    map[string]*evm.Parts
	byTx      map[string]txLoc
	safe      uint64
	finalized uint64
	changed   chan struct{} // closed and replaced on every change
	orphans   orphanKeep    // blocks reorged out, for Since

	// served is the highest head this replica has answered: eth_blockNumber
	// never goes below it, even when a reorg shortens the chain.
	served atomic.Uint64
	// top mirrors the head for lock-free reads (nil: empty; never a
	// number, so that a chain at genesis has a head).
	top atomic.Pointer[evm.Parts]
	// live is false while the follower has lost the feed: the window may
	// be stale, and the router forwards instead of answering from it.
	live atomic.Bool

	// Headers announced ahead of the window (header.go): never served,
	// newest last, at most maxAhead; aheadTop is the highest number among
	// them (0: none) and aheadAt when the last came, for lock-free reads.
	ahead     []*Header
	aheadTop  atomic.Uint64
	aheadAt   atomic.Int64
	announced chan struct{} // closed and replaced on every announcement

	onApply func(ev *Event, reorgDepth int) // metrics, called under mu; nil in tests
}

type txLoc struct {
	e *evm.Parts
	i int
}

// NewWindow returns an empty window that keeps size blocks (0: DefaultWindow).
func NewWindow(size int) *Window {
	if size <= 0 {
		size = DefaultWindow
	}
	return &Window{
		size:    size,
		byHash:  map[string]*evm.Parts{},
		byTx:    map[string]txLoc{},
		changed: make(chan struct{}),

		announced: make(chan struct{}),
	}
}

// Size is how many blocks the window keeps.
func (w *Window) Size() int { return w.size }

// Changed returns a channel closed at the window's next change.
func (w *Window) Changed() <-chan struct{} {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.changed
}

// Seq is the sequence number of the last event applied, and the history it
// belongs to.
func (w *Window) Seq() (gen string, seq uint64) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.gen, w.seq
}

// Reset replaces the whole window with a snapshot.
func (w *Window) Reset(s *Snapshot) error {
	es := make([]*evm.Parts, 0, len(s.Blocks))
	for _, b := range s.Blocks {
		e, err := evm.Split(b)
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		es = append(es, e)
	}
	es = nextCanon(nil, nil, es, firstParent(es), w.size)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen, w.seq, w.safe, w.finalized = s.Gen, s.Seq, s.Safe, s.Finalized
	w.byHash = make(map[string]*evm.Parts, len(es))
	w.byTx = map[string]txLoc{}
	before := w.canon
	w.canon = es
	for _, e := range es {
		w.add(e)
	}
	w.keepOrphans(before)
	w.notify()
	return nil
}

// Apply applies the event that follows the window's sequence number.
func (w *Window) Apply(ev *Event) error {
	added := make([]*evm.Parts, 0, len(ev.Added))
	for _, b := range ev.Added {
		e, err := evm.Split(b)
		if err != nil {
			return fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		added = append(added, e)
	}
	w.mu.Lock()
	if ev.Seq != w.seq+1 {
		w.mu.Unlock()
		return fmt.Errorf("%w: %d after %d", errOutOfOrder, ev.Seq, w.seq)
	}
	before := w.canon
	w.canon = nextCanon(w.canon, ev.Dropped, added, firstParent(added), w.size)
	kept := make(map[*evm.Parts]bool, len(w.canon))
	for _, e := range w.canon {
		kept[e] = true
	}
	depth := 0
	for _, e := range before {
		if !kept[e] {
			w.remove(e)
			if len(added) > 0 && e.Number >= added[0].Number {
				depth++
			}
		}
	}
	for _, e := range added {
		w.add(e)
	}
	w.keepOrphans(before)
	w.seq = ev.Seq
	if ev.Safe > 0 {
		w.safe = ev.Safe
	}
	if ev.Finalized > 0 {
		w.finalized = ev.Finalized
	}
	if w.onApply != nil {
		// Before notify: whoever wakes on the change sees its metrics.
		w.onApply(ev, depth)
	}
	w.notify()
	w.mu.Unlock()
	return nil
}

func (w *Window) add(e *evm.Parts) {
	w.byHash[e.Hash] = e
	for i, h := range e.TxHashes {
		w.byTx[h] = txLoc{e, i}
	}
}

func (w *Window) remove(e *evm.Parts) {
	if w.byHash[e.Hash] == e {
		delete(w.byHash, e.Hash)
	}
	for _, h := range e.TxHashes {
		if w.byTx[h].e == e {
			delete(w.byTx, h)
		}
	}
}

func (w *Window) notify() {
	w.pruneAhead()
	if n := len(w.canon); n > 0 {
		w.top.Store(w.canon[n-1])
	} else {
		w.top.Store(nil)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// nextCanon is the window after an event: dropped blocks leave; the added
// branch replaces everything from its first number up, and when it does
// not hang off the block below it (parent is the first added block's
// parent: a gap, or a break the leader could not walk back), everything
// below goes too; then the window keeps its newest size blocks. Every
// store applies this same rule, and so does the leader's own view
// (NextChain); the Redis script spells it out again in Lua.
func nextCanon[T canonical](cur []T, dropped []Ref, added []T, parent string, size int) []T {
	out := make([]T, 0, len(cur)+len(added))
	for _, e := range cur {
		if !isDropped(dropped, refOf(e).Hash) {
			out = append(out, e)
		}
	}
	if len(added) > 0 {
		first := refOf(added[0])
		for len(out) > 0 && refOf(out[len(out)-1]).Number >= first.Number {
			out = out[:len(out)-1]
		}
		if n := len(out); n > 0 && (refOf(out[n-1]).Number+1 != first.Number || refOf(out[n-1]).Hash != parent) {
			out = out[:0]
		}
		out = append(out, added...)
	}
	if len(out) > size {
		out = out[len(out)-size:]
	}
	return out
}

// NextChain is the canonical chain, as refs, after ev: what every store's
// window holds once ev is applied.
func NextChain(cur []Ref, ev *Event, size int) []Ref {
	added := make([]Ref, len(ev.Added))
	for i, b := range ev.Added {
		added[i] = refOf(b)
	}
	return nextCanon(cur, ev.Dropped, added, firstParent(ev.Added), size)
}

// firstParent is the parent of the first of blocks, "" when there is none.
func firstParent[T *evm.Block | *evm.Parts](blocks []T) string {
	if len(blocks) == 0 {
		return ""
	}
	switch b := any(blocks[0]).(type) {
	case *evm.Block:
		return b.Parent
	case *evm.Parts:
		return b.Parent
	}
	return ""
}

// canonical is what nextCanon orders: a Ref, a *evm.Block, or the
// *evm.Parts split from one.
type canonical interface{ Ref | *evm.Block | *evm.Parts }

// refOf names v.
func refOf[T canonical](v T) Ref {
	switch v := any(v).(type) {
	case *evm.Block:
		return Ref{Number: v.Number, Hash: v.Hash}
	case *evm.Parts:
		return Ref{Number: v.Number, Hash: v.Hash}
	case Ref:
		return v
	}
	return Ref{}
}

func isDropped(dropped []Ref, hash string) bool {
	for _, r := range dropped {
		if r.Hash == hash {
			return true
		}
	}
	return false
}

// SetLive records whether the window follows the feed right now.
func (w *Window) SetLive(on bool) { w.live.Store(on) }

// Latest is the head's number when the window is live and not empty (0
// at genesis); ok is false when it must not answer (empty, or the feed is
// lost). It takes no lock.
func (w *Window) Latest() (n uint64, ok bool) {
	h := w.top.Load()
	if h == nil {
		return 0, false
	}
	return h.Number, w.live.Load()
}

// HeadRef is the window's head: its number, hash and timestamp (unix
// seconds); ok is false while the window is empty. It takes no lock: the
// router judges the window's freshness by it on every call.
func (w *Window) HeadRef() (n uint64, hash string, time uint64, ok bool) {
	h := w.top.Load()
	if h == nil {
		return 0, "", 0, false
	}
	return h.Number, h.Hash, h.Time, true
}

// Head is the window's head number and hash; ok is false while it is empty.
func (w *Window) Head() (n uint64, hash string, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.canon) == 0 {
		return 0, "", false
	}
	h := w.canon[len(w.canon)-1]
	return h.Number, h.Hash, true
}

// Tags are the numbers latest, safe and finalized resolve to; a zero
// Safe or Finalized is not known.
type Tags struct {
	Latest, Safe, Finalized uint64
}

// Tags returns the cluster's tags; ok is false while the window is empty.
func (w *Window) Tags() (Tags, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.canon) == 0 {
		return Tags{}, false
	}
	return Tags{Latest: w.canon[len(w.canon)-1].Number, Safe: w.safe, Finalized: w.finalized}, true
}

// Blocks returns the canonical blocks, ascending.
func (w *Window) Blocks() []*evm.Block {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]*evm.Block, len(w.canon))
	for i, e := range w.canon {
		out[i] = e.Block
	}
	return out
}

// byNumber returns the canonical entry at n; the caller holds mu.
func (w *Window) byNumber(n uint64) *evm.Parts {
	if len(w.canon) == 0 {
		return nil
	}
	low := w.canon[0].Number
	if n < low || n > w.canon[len(w.canon)-1].Number {
		return nil
	}
	return w.canon[n-low]
}

// headTime is the head block's number and timestamp.
func (w *Window) headTime() (n, time uint64, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.canon) == 0 {
		return 0, 0, false
	}
	h := w.canon[len(w.canon)-1]
	return h.Number, h.Time, true
}

// CanonicalNumber is the number of the canonical block with hash h (any
// case) the window holds; ok is false for any other hash.
func (w *Window) CanonicalNumber(h string) (n uint64, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if e := w.byHash[strings.ToLower(h)]; e != nil {
		return e.Number, true
	}
	return 0, false
}

// CanonicalHash is the hash of canonical block n as the window knows it: a
// block it holds, or the parent of the lowest one; ok is false for any
// other number.
func (w *Window) CanonicalHash(n uint64) (hash string, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if e := w.byNumber(n); e != nil {
		return e.Hash, true
	}
	if len(w.canon) > 0 && w.canon[0].Number == n+1 && w.canon[0].Parent != "" {
		return w.canon[0].Parent, true
	}
	return "", false
}

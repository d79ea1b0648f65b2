package headstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/venn-gateway/venn/evm"
)

// Cursor is where a reader of the chain stands: the last block whose
// changes it was given, by number and hash. A cursor with no hash is
// taken as canonical (a reader that started where no hash was known).
type Cursor struct {
	Number uint64
	Hash   string
}

// Changes is what a reader at a cursor has not yet been given, as geth's
// filter system gives it: the blocks it was given that left the chain
// (their logs again, removed), then the canonical blocks after the fork
// point up to the head. Blocks below the window are settled: those
// between the cursor and the window are named by GapFrom..GapTo, for the
// reader to take from history or the remotes.
type Changes struct {
	// Removed are the blocks the reader was given that are no longer
	// canonical, ascending (geth sends removed logs in that order).
	Removed []*evm.Parts
	// Gap, when HasGap, is the canonical numbers GapFrom..GapTo between
	// the cursor and Added that the window no longer holds.
	GapFrom, GapTo uint64
	HasGap         bool
	// Added are the canonical blocks after the fork point, ascending, up
	// to the window's head.
	Added []*evm.Parts
	// Next is the cursor once these changes are given.
	Next Cursor
}

// Empty reports whether there is nothing to give.
func (c *Changes) Empty() bool { return len(c.Removed) == 0 && len(c.Added) == 0 && !c.HasGap }

// ErrOrphanUnknown is returned by Since when a block the reader was given
// left the chain and neither the window nor fetch has it: its logs cannot
// be sent again as removed, and the changes would be wrong without them.
var ErrOrphanUnknown = errors.New("a block the reader was given left the chain and venn no longer holds it")

// FetchBlock fetches a block by hash from elsewhere (the remotes), for a
// reorg walk that reaches an orphan this replica never saw; nil, nil when
// it is unknown there too.
type FetchBlock func(ctx context.Context, hash string) (*evm.Parts, error)

// Since is what a reader at cur has missed: the changes from cur to the
// window's head, reorg-corrected. It is the one replay every poller and
// resumer of the chain shares (filters polled by eth_getFilterChanges,
// subscribers that come back), so they agree with each other and with
// the live subscriptions. A window that is empty, or below a cursor it
// does not know (rebuilt, not back yet), gives no changes. fetch, which
// may be nil, finds orphans the window did not see leave (this replica
// started after the reorg); a walk that cannot find one fails with
// ErrOrphanUnknown rather than return changes without its removed logs.
func (w *Window) Since(ctx context.Context, cur Cursor, fetch FetchBlock) (Changes, error) {
	w.mu.RLock()
	canon := w.canon // replaced, never written, by Apply and Reset
	w.mu.RUnlock()
	return since(ctx, canon, w.Orphan, cur, fetch)
}

// SinceOn is Since over canon, a chain other than the window's own (a
// subscription dispatcher's chain told, ascending and parent-linked), with
// the window's orphans and no fetch: it does no I/O, for a caller that
// holds a lock.
func (w *Window) SinceOn(canon []*evm.Parts, cur Cursor) (Changes, error) {
	return since(context.Background(), canon, w.Orphan, cur, nil)
}

func since(ctx context.Context, canon []*evm.Parts, orphan func(string) *evm.Parts, cur Cursor, fetch FetchBlock) (Changes, error) {
	out := Changes{Next: cur}
	if len(canon) == 0 {
		return out, nil
	}
	low, top := canon[0].Number, canon[len(canon)-1].Number
	// canonAt is the canonical hash at n: a held block, or the parent of
	// the lowest one.
	canonAt := func(n uint64) (string, bool) {
		switch {
		case n >= low && n <= top:
			return canon[n-low].Hash, true
		case n+1 == low:
			return canon[0].Parent, true
		}
		return "", false
	}
	at := cur
	var removed []*evm.Parts // descending while walked
	for {
		if at.Number+1 < low {
			// Below the window: settled, taken as canonical.
			out.HasGap, out.GapFrom, out.GapTo = true, at.Number+1, low-1
			out.Added = canon
			break
		}
		if h, ok := canonAt(at.Number); ok && (at.Hash == "" || strings.EqualFold(h, at.Hash)) {
			if at.Number < top {
				out.Added = canon[at.Number+1-low:]
			}
			break
		}
		if len(removed) > len(canon)+1 {
			return Changes{Next: cur}, fmt.Errorf("%w: the reorg is deeper than the window (%d blocks)", ErrOrphanUnknown, len(canon))
		}
		// at left the chain: walk down its branch.
		p := orphan(at.Hash)
		if p == nil && at.Number > top {
			// Above the head: a block the window never held is not gone,
			// only not back yet (a rebuilt window). A reader given it is
			// given nothing until the window shows what replaced it.
			if len(removed) == 0 {
				return out, nil
			}
		}
		if p == nil && fetch != nil && at.Hash != "" {
			var err error
			if p, err = fetch(ctx, at.Hash); err != nil {
				return Changes{Next: cur}, fmt.Errorf("fetch orphan %d %s: %w", at.Number, at.Hash, err)
			}
		}
		if p == nil || p.Number != at.Number {
			return Changes{Next: cur}, fmt.Errorf("%w: block %d %s", ErrOrphanUnknown, at.Number, at.Hash)
		}
		removed = append(removed, p)
		if p.Number == 0 {
			return Changes{Next: cur}, fmt.Errorf("%w: another genesis", ErrOrphanUnknown)
		}
		at = Cursor{Number: p.Number - 1, Hash: p.Parent}
	}
	for i := len(removed) - 1; i >= 0; i-- {
		out.Removed = append(out.Removed, removed[i])
	}
	switch {
	case len(out.Added) > 0:
		h := out.Added[len(out.Added)-1]
		out.Next = Cursor{Number: h.Number, Hash: h.Hash}
	case len(removed) > 0:
		out.Next = at // the fork point: the new branch is not longer yet
	}
	return out, nil
}

// Orphan is a block that left the window's chain, recently, by hash; nil
// when the window holds none.
func (w *Window) Orphan(hash string) *evm.Parts {
	if hash == "" {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.orphans.m[strings.ToLower(hash)]
}

// orphanKeep remembers the blocks that left the window's chain above its
// low end (reorged out, not aged out), the last n of them, so that a
// reader given one can be given its logs again as removed.
type orphanKeep struct {
	m    map[string]*evm.Parts
	ring []string
	next int
}

func (k *orphanKeep) add(e *evm.Parts, n int) {
	if k.m == nil {
		k.m = make(map[string]*evm.Parts)
		k.ring = make([]string, n)
	}
	if _, ok := k.m[e.Hash]; ok {
		return
	}
	if old := k.ring[k.next]; old != "" {
		delete(k.m, old)
	}
	k.ring[k.next] = e.Hash
	k.m[e.Hash] = e
	k.next = (k.next + 1) % len(k.ring)
}

// keepOrphans remembers what of before is not in the window's canonical
// chain now and not below it; the caller holds mu.
func (w *Window) keepOrphans(before []*evm.Parts) {
	if len(w.canon) == 0 {
		return
	}
	low := w.canon[0].Number
	for _, e := range before {
		if e.Number < low {
			continue
		}
		if c := w.byNumber(e.Number); c != nil && c.Hash == e.Hash {
			continue
		}
		w.orphans.add(e, w.size)
	}
}

// View is the window at one sequence number: its history and seq, its
// canonical blocks and finality, read at once.
type View struct {
	Gen             string
	Seq             uint64
	Canon           []*evm.Parts // ascending; shared, never modified
	Safe, Finalized uint64
}

// View reads the window at once, for a reader that must know which event
// the chain it reads follows (the JetStream feed: it goes on from there).
func (w *Window) View() View {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return View{Gen: w.gen, Seq: w.seq, Canon: w.canon, Safe: w.safe, Finalized: w.finalized}
}

// SinceView is Since over a view read earlier, with the window's orphans.
func (w *Window) SinceView(ctx context.Context, v View, cur Cursor, fetch FetchBlock) (Changes, error) {
	return since(ctx, v.Canon, w.Orphan, cur, fetch)
}

package avail

import (
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Kind is a kind of historical data a remote may not keep: the registry's
// (evm.Method.Data).
type Kind = evm.DataKind

// Kinds lists the kinds, in status and metrics order.
var Kinds = [...]Kind{evm.DataState, evm.DataBlocks, evm.DataLogs, evm.DataTraces}

// windowed reports kinds a pruned node keeps a moving window of (state,
// and the traces replayed from it): what was learnt at one head moves up
// with the head. Bodies, receipts and logs are expired at a fixed block.
func windowed(k Kind) bool { return k == evm.DataState || k == evm.DataTraces }

// mark is what was learnt of one kind of data at a remote: the oldest
// block it serves, as of its head atHead (for a windowed kind the window
// moves up with the head from there).
type mark struct {
	oldest uint64
	// lacks: every block below it is known to be missing (lacks <= oldest;
	// the probe leaves a gap between them where its search stopped).
	lacks  uint64
	atHead uint64
	probed bool // by the probe; else from an answer
	at     time.Time
	// base is the mark an answer's raised (nil: none): it holds again once
	// this one is older than AnswerTTL.
	base *mark
}

// AnswerTTL bounds what one answer teaches: a node that said "missing trie
// node" while it was syncing, or a load balancer that sent one call to a
// pruned backend, is tried again after it, probed or not.
const AnswerTTL = time.Hour

// live is the mark that holds at now: m, or the one it raised once it is
// stale.
func (m *mark) live(now time.Time) *mark {
	for m != nil && !m.probed && now.Sub(m.at) > AnswerTTL {
		m = m.base
	}
	return m
}

// drifted is the mark's oldest block at head.
func (m *mark) drifted(k Kind, head uint64) uint64 { return m.drift(m.oldest, k, head) }

// drift moves block b, learnt at the mark's head, up with head for a
// windowed kind.
func (m *mark) drift(b uint64, k Kind, head uint64) uint64 {
	if b == 0 || !windowed(k) || head <= m.atHead {
		return b
	}
	return b + (head - m.atHead)
}

// Windows is one remote's learnt windows, by kind; the zero value knows
// nothing. Safe for concurrent use.
type Windows struct {
	marks [evm.NumDataKinds]atomic.Pointer[mark]
}

// Oldest is the oldest block of kind k learnt to be served at the remote's
// head (0: all, or not known).
func (w *Windows) Oldest(k Kind, head uint64, now time.Time) uint64 {
	m := w.marks[k].Load().live(now)
	if m == nil {
		return 0
	}
	return m.drifted(k, head)
}

// LacksBelow is the block below which the remote is known not to keep
// kind k (0: none known). Between it and Oldest the remote may or may not.
func (w *Windows) LacksBelow(k Kind, head uint64, now time.Time) uint64 {
	m := w.marks[k].Load().live(now)
	if m == nil {
		return 0
	}
	return m.drift(m.lacks, k, head)
}

// Source is where the window of kind k comes from: "probe", "answers", or
// "unknown" (nothing learnt yet: every block is tried), and when it was
// learnt.
func (w *Windows) Source(k Kind, now time.Time) (string, time.Time) {
	switch m := w.marks[k].Load().live(now); {
	case m != nil && m.probed:
		return "probe", m.at
	case m != nil:
		return "answers", m.at
	}
	return "unknown", time.Time{}
}

// Probed sets the window of kind k from a probe, over what answers taught:
// a probe may lower a window they raised. It returns the oldest block at
// head.
func (w *Windows) Probed(k Kind, oldest, lacks, atHead uint64, at time.Time, head uint64) uint64 {
	m := &mark{oldest: oldest, lacks: lacks, atHead: atHead, probed: true, at: at}
	w.marks[k].Store(m)
	return m.drifted(k, head)
}

// Lacks records that the remote lacks kind k at block n (an answer said
// so), and at least every block below floor (a block the answer named as
// its earliest; 0: none named). It only ever raises the oldest block: the
// probe is what lowers it. It returns the oldest block now, and false when
// this was known already.
func (w *Windows) Lacks(k Kind, n, floor, head uint64, now time.Time) (uint64, bool) {
	next := max(n+1, floor)
	for {
		old := w.marks[k].Load()
		base := old.live(now)
		oldest := next
		if base != nil {
			if base.drift(base.lacks, k, head) >= next {
				return 0, false
			}
			oldest = max(oldest, base.drifted(k, head))
			if !base.probed {
				base = base.base // one answer's mark raises the probe's, not another's
			}
		}
		m := &mark{oldest: oldest, lacks: next, atHead: head, at: now, base: base}
		if w.marks[k].CompareAndSwap(old, m) {
			return oldest, true
		}
	}
}

package remotes

// Block availability: the oldest block each remote can answer, for each
// kind of data (state, blocks and receipts, logs, traces). A full node
// keeps a window of recent state; a node with history expiry has no old
// bodies, receipts or logs. Selection never offers a call for older data
// to a remote whose window does not reach it, and a call that no remote's
// window reaches is answered at once (Pool.unavailable), with no upstream
// call.
//
// What config states (archive, max_block_lookback) wins. Otherwise the
// window is learnt by the probe (avail_probe.go) and from answers: a
// "missing trie node", a "pruned", or a null for a block far below the
// remote's head raise its oldest block past the one asked.

import (
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// DataKind is a kind of historical data a remote may not keep: the
// registry's (evm.Method.Data).
type DataKind = evm.DataKind

const (
	KindNone   = evm.DataNone   // the call reads no historical data (or none we route on)
	KindState  = evm.DataState  // account state at a block (eth_getBalance, eth_call, ...)
	KindBlocks = evm.DataBlocks // block bodies and receipts by number
	KindLogs   = evm.DataLogs   // eth_getLogs
	KindTraces = evm.DataTraces // trace_* and debug_trace* at a block
	numKinds   = evm.NumDataKinds
)

// DataKinds lists the kinds, in status and metrics order.
var DataKinds = [...]DataKind{KindState, KindBlocks, KindLogs, KindTraces}

// windowed reports kinds a pruned node keeps a moving window of (state,
// and the traces replayed from it): what was learnt at one head moves up
// with the head. Bodies, receipts and logs are expired at a fixed block.
func windowed(k DataKind) bool { return k == KindState || k == KindTraces }

// histOf is the kind of data a call reads and the oldest block it reads
// it at; KindNone when it names no block by number (a hash, a tag but
// earliest, or unparsed params).
func histOf(cv *callView) (DataKind, uint64) {
	k := cv.row.Data
	if k == KindNone {
		return KindNone, 0
	}
	b := cv.block
	ok := cv.hasBlock && cv.blockOK
	if k == KindLogs {
		b, ok = cv.from, cv.logsOK && !cv.byHash
	}
	switch {
	case !ok:
		return KindNone, 0
	case b.kind == evm.RefNumber:
		return k, b.n
	case b.kind == evm.RefEarliest:
		return k, 0
	}
	return KindNone, 0
}

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
	// this one is older than answerTTL.
	base *mark
}

// answerTTL bounds what one answer teaches: a node that said "missing trie
// node" while it was syncing, or a load balancer that sent one call to a
// pruned backend, is tried again after it, probed or not.
const answerTTL = time.Hour

// live is the mark that holds at now: m, or the one it raised once it is
// stale.
func (m *mark) live(now time.Time) *mark {
	for m != nil && !m.probed && now.Sub(m.at) > answerTTL {
		m = m.base
	}
	return m
}

// availability is one remote's learnt windows, by kind.
type availability struct {
	marks [numKinds]atomic.Pointer[mark]
}

// stated reports whether config states the remote's window, which then
// wins over anything learnt.
func (r *Remote) stated() bool { return r.cfg.Archive || r.cfg.MaxBlockLookback > 0 }

// Oldest is the oldest block of kind k the remote is taken to serve now:
// what config states, else what was learnt (0: all, or not known).
func (r *Remote) Oldest(k DataKind) uint64 {
	switch {
	case r.cfg.Archive:
		return 0
	case r.cfg.MaxBlockLookback > 0:
		return r.Head() - min(r.Head(), r.cfg.MaxBlockLookback)
	}
	m := r.av.marks[k].Load().live(r.now())
	if m == nil {
		return 0
	}
	return m.drifted(k, r.Head())
}

// drifted is the mark's oldest block at head.
func (m *mark) drifted(k DataKind, head uint64) uint64 { return m.drift(m.oldest, k, head) }

// drift moves block b, learnt at the mark's head, up with head for a
// windowed kind.
func (m *mark) drift(b uint64, k DataKind, head uint64) uint64 {
	if b == 0 || !windowed(k) || head <= m.atHead {
		return b
	}
	return b + (head - m.atHead)
}

// lacksBelow is the block below which the remote is known not to keep kind
// k (0: none known). Between it and Oldest the remote may or may not.
func (r *Remote) lacksBelow(k DataKind) uint64 {
	switch {
	case r.cfg.Archive:
		return 0
	case r.cfg.MaxBlockLookback > 0:
		return r.Oldest(k)
	}
	m := r.av.marks[k].Load().live(r.now())
	if m == nil {
		return 0
	}
	return m.drift(m.lacks, k, r.Head())
}

// serves reports whether the remote keeps kind k at block n; unsure
// admits a block the remote is not known to lack, for a call no remote is
// known to serve (Pool.unavailable).
func (r *Remote) serves(k DataKind, n uint64, unsure bool) bool {
	switch {
	case k == KindNone:
		return true
	case unsure:
		return n >= r.lacksBelow(k)
	}
	return n >= r.Oldest(k)
}

// setMark records m for kind k and its gauge.
func (r *Remote) setMark(k DataKind, m *mark) {
	r.av.marks[k].Store(m)
	r.m.oldest[k].Set(float64(m.drifted(k, r.Head())))
}

// learnLacks records that the remote lacks kind k at block n (its answer
// said so), and at least every block below floor (a block the answer
// named as its earliest; 0: none named). It only ever raises the oldest
// block: the probe is what lowers it.
func (r *Remote) learnLacks(k DataKind, n, floor uint64) {
	if k == KindNone || r.stated() {
		return
	}
	next := max(n+1, floor)
	head, now := r.Head(), r.now()
	for {
		old := r.av.marks[k].Load()
		base := old.live(now)
		oldest := next
		if base != nil {
			if base.drift(base.lacks, k, head) >= next {
				return // known already
			}
			oldest = max(oldest, base.drifted(k, head))
			if !base.probed {
				base = base.base // one answer's mark raises the probe's, not another's
			}
		}
		m := &mark{oldest: oldest, lacks: next, atHead: head, at: now, base: base}
		if r.av.marks[k].CompareAndSwap(old, m) {
			r.m.oldest[k].Set(float64(oldest))
			r.log.Debug("remote lacks old data", "kind", k.String(), "block", n, "oldest", oldest)
			return
		}
	}
}

// prunedNullDepth: a null block this far below a remote's head is pruned
// history, not a remote that has not caught up yet.
const prunedNullDepth = 128

// lacksData reports an answer that says the remote has not got the data at
// the block asked: pruned state or history, or (for a block the remote
// claims by its head) a missing header. Other missing data ("indexing is
// in progress", a -32001) may pass: it teaches nothing of the window.
func lacksData(v verdict.Verdict) bool {
	switch v.Reason {
	case verdict.ReasonMissingState, verdict.ReasonPruned, verdict.ReasonHeaderNotFound:
		return true
	}
	return false
}

// learnFrom learns from one judged reply of a call that reads kind k at
// block n: pruned state or history, or a null far below the remote's head.
func (j *judged) learnFrom(k DataKind, n uint64) {
	if k == KindNone || j.r == nil {
		return
	}
	switch {
	case j.mean == meanMissing && k == KindBlocks && n+prunedNullDepth <= j.r.Head():
		j.r.learnLacks(k, n, 0)
	case j.err != nil && (j.v.Reason == verdict.ReasonMissingState || j.v.Reason == verdict.ReasonPruned):
		j.r.learnLacks(k, n, j.v.Oldest)
	case j.err != nil && j.v.Reason == verdict.ReasonHeaderNotFound && n+prunedNullDepth <= j.r.Head():
		// A header not found far below the head: expired history.
		j.r.learnLacks(k, n, j.v.Oldest)
	}
}

// Availability is one remote's window for one kind of data, for status.
type Availability struct {
	Kind   string `json:"kind"`
	Oldest uint64 `json:"oldest_block"` // 0: every block (or not known)
	// Source says where it comes from: "config", "probe", "answers", or
	// "unknown" (nothing learnt yet: every block is tried).
	Source    string    `json:"source"`
	LearnedAt time.Time `json:"learned_at,omitzero"`
}

// availabilityOf is r's windows, for status.
func (r *Remote) availabilityOf() []Availability {
	out := make([]Availability, 0, len(DataKinds))
	for _, k := range DataKinds {
		a := Availability{Kind: k.String(), Oldest: r.Oldest(k), Source: "unknown"}
		switch m := r.av.marks[k].Load().live(r.now()); {
		case r.stated():
			a.Source = "config"
		case m != nil && m.probed:
			a.Source, a.LearnedAt = "probe", m.at
		case m != nil:
			a.Source, a.LearnedAt = "answers", m.at
		}
		out = append(out, a)
	}
	return out
}

// histRoute sets the kind of data and the block a call on rt reads, so
// that selection offers it only to remotes that keep them.
func (rt *route) histRoute(method string, params []byte) {
	if rt.row(method).Data == KindNone {
		return
	}
	cv := rt.view(method, params)
	rt.hist, rt.histAt = histOf(&cv)
}

// unavailable is the answer to a call for data older than every remote of
// the chain keeps (nil when one may have it): it names the block and the
// oldest block any remote serves, and costs no upstream call: it is
// marked jrpc.Local, venn's own answer. When no
// remote is known to serve the block but some are not known to lack it
// (the probe's search stopped short of their oldest), the call goes to
// those (rt.unsure): their answers settle it.
func (p *Pool) unavailable(method string, rt *route) error {
	oldest, any, maybe := uint64(0), false, false
	for _, r := range p.members() {
		if !r.configuredFor(method) {
			continue
		}
		o := r.Oldest(rt.hist)
		if rt.histAt >= o {
			return nil
		}
		maybe = maybe || rt.histAt >= r.lacksBelow(rt.hist)
		if !any || o < oldest {
			oldest, any = o, true
		}
	}
	if !any {
		return nil // no remote is configured for it: unserved says so
	}
	if maybe {
		rt.unsure = true
		return nil
	}
	return jrpc.Local(&unavailableError{chain: p.conf().Chain, kind: rt.hist, block: rt.histAt, oldest: oldest})
}

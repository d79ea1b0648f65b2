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
// remote's head raise its oldest block past the one asked. What the
// windows learnt come to (drift with the head, an answer's lesson
// outliving its hour) is remotes/avail's; this file says what config
// states, learns from judged answers and decides selection.

import (
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/avail"
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
var DataKinds = avail.Kinds

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
	return r.av.Oldest(k, r.Head(), r.now())
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
	return r.av.LacksBelow(k, r.Head(), r.now())
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

// learnLacks records that the remote lacks kind k at block n (its answer
// said so), and at least every block below floor (a block the answer
// named as its earliest; 0: none named); avail.Windows.Lacks.
func (r *Remote) learnLacks(k DataKind, n, floor uint64) {
	if k == KindNone || r.stated() {
		return
	}
	if oldest, raised := r.av.Lacks(k, n, floor, r.Head(), r.now()); raised {
		r.m.oldest[k].Set(float64(oldest))
		r.log.Debug("remote lacks old data", "kind", k.String(), "block", n, "oldest", oldest)
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

// availabilityOf is r's windows, for status.
func (r *Remote) availabilityOf() []Availability {
	out := make([]Availability, 0, len(DataKinds))
	for _, k := range DataKinds {
		a := Availability{Kind: k.String(), Oldest: r.Oldest(k), Source: "config"}
		if !r.stated() {
			a.Source, a.LearnedAt = r.av.Source(k, r.now())
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

package headstore

import (
	"encoding/json"
	"strconv"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// The window answers a call only when it can give exactly the node's
// answer, so it reads a call's exact (geth's) reading only: a call the
// router parsed (evm.ParseCall) that is not Exact goes to the node, which
// produces its own error or answer.

// Fixed answers. Results are never written to by callers (they are the
// remotes' own bytes), so these are shared.
var (
	resultNull      = json.RawMessage("null")
	resultEmptyList = json.RawMessage("[]")
)

// Answer answers a call from the window when it can: res is the node's own
// bytes (sub-slices of what the remotes sent, or small encodings like a hex
// quantity or null). ok is false when the window cannot answer exactly what
// the node would (unknown method, block below the window, a tag it does not
// know, params not read Exact — the node produces those errors), and the
// router forwards the call upstream.
//
// c is taken by value so that a caller behind an interface does not move
// it to the heap. res must not be modified: it shares memory with the
// window.
func (w *Window) Answer(c evm.Call) (res json.RawMessage, ok bool) {
	if !c.Exact {
		return nil, false
	}
	switch c.Kind {
	case evm.KindBlockNumber:
		return w.answerBlockNumber()
	case evm.KindBlock:
		return w.answerBlock(&c)
	case evm.KindBlockReceipts:
		return w.answerBlockReceipts(&c)
	case evm.KindTx, evm.KindReceipt:
		return w.answerTx(&c)
	case evm.KindTxByIndex:
		return w.answerTxByIndex(&c)
	case evm.KindTxCount:
		return w.answerCount(&c, txCount)
	case evm.KindUncleCount:
		return w.answerCount(&c, uncleCount)
	case evm.KindLogs:
		return w.answerLogs(&c.Filter)
	}
	return nil, false
}

// answerBlockNumber answers the head, never below what this replica has
// answered before: after a reorg to a shorter chain the number holds until
// the chain grows past it.
func (w *Window) answerBlockNumber() (json.RawMessage, bool) {
	top := w.top.Load()
	if top == nil {
		return nil, false
	}
	head := top.Number
	// A header announced ahead of the window (header.go) is the head a
	// newHeads subscriber already has.
	head = max(head, w.aheadOf(head))
	return quantityJSON(w.Monotonic(head, head)), true
}

// maxFloorLead: a floor this far above the cluster's corroborated head
// cannot be a reorg to a shorter chain; it was set by a head nothing stands
// behind any more.
const maxFloorLead = 64

// Monotonic returns the highest of n and every head this replica has
// answered, and records it: eth_blockNumber never goes backwards for a
// client, even across a reorg to a shorter chain or a forwarded answer
// from a lagging remote. n must be a corroborated head (the window's own,
// or no more than the remotes' corroborated head). ceiling is the
// cluster's corroborated head now (0: unknown): a floor more than
// maxFloorLead above it heals down to the higher of n and ceiling, so that
// a head once served by mistake does not stand until a restart.
func (w *Window) Monotonic(n, ceiling uint64) uint64 {
	for {
		served := w.served.Load()
		next := max(served, n)
		if ceiling > 0 && served > ceiling+maxFloorLead {
			next = max(n, ceiling)
		}
		if next == served || w.served.CompareAndSwap(served, next) {
			return next
		}
	}
}

// answerBlock: eth_getBlockByNumber(number, full), eth_getBlockByHash(hash, full).
func (w *Window) answerBlock(c *evm.Call) (json.RawMessage, bool) {
	e, ok := w.blockOf(c)
	switch {
	case !ok:
		return nil, false
	case e == nil:
		return resultNull, true
	case c.Full:
		return e.Raw, true
	default:
		return e.HashOnly, true
	}
}

// answerBlockReceipts: eth_getBlockReceipts(number, tag, hash or EIP-1898
// object), the receipts exactly as the remote sent them.
func (w *Window) answerBlockReceipts(c *evm.Call) (json.RawMessage, bool) {
	e, ok := w.blockOf(c)
	switch {
	case !ok:
		return nil, false
	case e == nil:
		return resultNull, true
	}
	return e.Block.Receipts, true
}

// answerTx: eth_getTransactionByHash(hash), eth_getTransactionReceipt(hash).
// A hash the window does not hold may be older, pending, or unknown: the
// node knows which.
func (w *Window) answerTx(c *evm.Call) (json.RawMessage, bool) {
	w.mu.RLock()
	loc, ok := w.byTx[string(c.Key[:])]
	w.mu.RUnlock()
	if !ok {
		return nil, false
	}
	if c.Kind == evm.KindReceipt {
		return loc.e.Receipts[loc.i], true
	}
	return loc.e.Txs[loc.i], true
}

// answerTxByIndex: eth_getTransactionByBlock{Number,Hash}AndIndex(block,
// index). geth answers null for an index past the block's transactions.
func (w *Window) answerTxByIndex(c *evm.Call) (json.RawMessage, bool) {
	e, ok := w.blockOf(c)
	switch {
	case !ok:
		return nil, false
	case e == nil || c.Index >= uint64(len(e.Txs)):
		return resultNull, true
	}
	return e.Txs[c.Index], true
}

// answerCount: eth_get{BlockTransaction,Uncle}CountBy{Number,Hash}.
func (w *Window) answerCount(c *evm.Call, count func(*evm.Parts) (uint64, bool)) (json.RawMessage, bool) {
	e, ok := w.blockOf(c)
	switch {
	case !ok:
		return nil, false
	case e == nil:
		return resultNull, true
	}
	n, ok := count(e)
	if !ok {
		return nil, false
	}
	return quantityJSON(n), true
}

func txCount(e *evm.Parts) (uint64, bool) { return uint64(len(e.Txs)), true }

// uncleCount counts the block's uncles array; the hash-only form is the
// shorter one to scan.
func uncleCount(e *evm.Parts) (uint64, bool) {
	u := jsonscan.Member(e.HashOnly, "uncles")
	if len(u) == 0 || u[0] != '[' {
		return 0, false
	}
	it := jsonscan.Array{Data: u, I: 1}
	var n uint64
	for {
		if _, ok := it.Next(); !ok {
			return n, true
		}
		n++
	}
}

// blockOf finds the block c names in the window. e is nil with ok true
// for a number above the head, which geth answers with null.
func (w *Window) blockOf(c *evm.Call) (e *evm.Parts, ok bool) {
	w.mu.RLock()
	e, future, ok := w.resolve(c.Ref, &c.Key)
	w.mu.RUnlock()
	if future {
		return nil, true
	}
	return e, ok
}

// resolve finds ref's canonical entry; the caller holds mu. future is set
// (with ok) for a number above the head. For a hash ref, key holds the
// lowercase hash (ref.Hash is not read, so callers need not allocate it).
func (w *Window) resolve(ref evm.BlockRef, key *[evm.HashLen]byte) (e *evm.Parts, future, ok bool) {
	if ref.Kind == evm.RefHash {
		e = w.byHash[string(key[:])]
		return e, false, e != nil
	}
	n, future, ok := w.number(ref)
	if !ok || future {
		return nil, future, ok
	}
	e = w.byNumber(n)
	return e, false, e != nil
}

// number resolves a number or tag against the window; the caller holds mu.
// future is set (with ok) for a number above the head, unless a header
// announced ahead of the window has it: then the number does not resolve
// (the window does not hold that block yet, and the remotes answer for
// it, as for any block the window lacks, rather than null). latest is the
// window's head, a whole block, even then. safe and finalized
// resolve only when known and in the window, earliest only when block 0 is
// in the window (geth resolves it to its history cutoff, 0 on a chain
// young enough to have block 0 near the head), pending never.
func (w *Window) number(ref evm.BlockRef) (n uint64, future, ok bool) {
	if len(w.canon) == 0 {
		return 0, false, false
	}
	low, head := w.canon[0].Number, w.canon[len(w.canon)-1].Number
	switch ref.Kind {
	case evm.RefLatest:
		return head, false, true
	case evm.RefSafe, evm.RefFinalized:
		n = w.safe
		if ref.Kind == evm.RefFinalized {
			n = w.finalized
		}
		// Zero is unknown; above the head, stale.
		return n, false, n != 0 && n >= low && n <= head
	case evm.RefEarliest:
		return 0, false, low == 0
	case evm.RefNumber:
		if ref.Number > head {
			if ref.Number <= w.aheadOf(head) {
				return 0, false, false
			}
			return 0, true, true
		}
		return ref.Number, false, ref.Number >= low
	}
	return 0, false, false
}

// answerLogs: eth_getLogs(filter) over blocks in the window, the log
// objects of the receipts (geth's eth_getLogs objects are the same), in
// block then log index order.
func (w *Window) answerLogs(f *evm.LogFilter) (json.RawMessage, bool) {
	// Entries are immutable once indexed: copy the range's pointers under
	// the lock and match without it, so a long range never holds up Apply.
	var buf [8]*evm.Parts
	ents := buf[:0]
	w.mu.RLock()
	if f.ByHash {
		if e := w.byHash[string(f.Hash[:])]; e != nil {
			ents = append(ents, e)
		}
	} else if from, to, ok := w.logRange(f); ok {
		low := w.canon[0].Number
		ents = append(ents, w.canon[from-low:to-low+1]...)
	}
	w.mu.RUnlock()
	if len(ents) == 0 {
		// An unknown hash, or a range the window does not cover.
		return nil, false
	}
	return collect(f, ents), true
}

// logRange resolves the filter's range as geth does; ok is false for every
// range geth refuses (from above to, beyond the head, pending) and every
// range not wholly in the window. The caller holds mu.
func (w *Window) logRange(f *evm.LogFilter) (from, to uint64, ok bool) {
	// geth checks explicit numbers before resolving tags.
	if f.From.Kind == evm.RefNumber && f.To.Kind == evm.RefNumber && f.From.Number > f.To.Number {
		return 0, 0, false
	}
	from, future, ok := w.number(f.From)
	if !ok || future {
		return 0, 0, false
	}
	to, future, ok = w.number(f.To)
	if !ok || future || from > to {
		return 0, 0, false
	}
	return from, to, true
}

// collect joins the logs of ents that f matches into a JSON array.
func collect(f *evm.LogFilter, ents []*evm.Parts) json.RawMessage {
	unfiltered := f.Unfiltered()
	size := 1
	for _, e := range ents {
		for i := range e.Logs {
			size += len(e.Logs[i].Raw) + 1
		}
	}
	var out []byte
	for _, e := range ents {
		for i := range e.Logs {
			l := &e.Logs[i]
			if !unfiltered && !f.Match(l.Address, l.Topics) {
				continue
			}
			if out == nil {
				// Exact when unfiltered; otherwise a bound, capped so a
				// selective filter over a long range does not over-allocate.
				if !unfiltered {
					size = min(size, max(16<<10, 2*len(l.Raw)+2))
				}
				out = make([]byte, 0, size)
				out = append(out, '[')
			} else {
				out = append(out, ',')
			}
			out = append(out, l.Raw...)
		}
	}
	if out == nil {
		return resultEmptyList
	}
	return append(out, ']')
}

// quantityJSON encodes n as a quoted hex quantity.
func quantityJSON(n uint64) json.RawMessage {
	b := make([]byte, 0, 2+2+16)
	b = append(b, '"', '0', 'x')
	b = strconv.AppendUint(b, n, 16)
	return append(b, '"')
}

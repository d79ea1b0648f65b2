package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
)

// History is the chain's history store as the router uses it: settled
// blocks, receipts and logs in Postgres.
type History interface {
	// Answer answers a call from stored data exactly as the node would;
	// ok is false when the store cannot, err when Postgres failed.
	Answer(ctx context.Context, c evm.Call) (res json.RawMessage, ok bool, err error)
	// Covered returns the stored sub-ranges of [from, to], ascending.
	Covered(ctx context.Context, from, to uint64) ([]blockstore.Range, error)
	// Logs returns the logs in [from, to] matching an eth_getLogs
	// filter, in order; the range must be covered.
	Logs(ctx context.Context, filter *evm.LogFilter, from, to uint64) (json.RawMessage, error)
	// Put stores settled blocks with their receipts.
	Put(ctx context.Context, blocks []*evm.Block) error
}

var _ History = (*blockstore.Chain)(nil)

// logsConcurrency bounds the parts of one eth_getLogs served in parts (from
// the store and the remotes) that run at once; the remotes split their
// parts further under their own bounds.
const logsConcurrency = 4

// settledLine is the cluster's settled line; ok is false while it is
// unknown.
func (rt *Router) settledLine() (uint64, bool) {
	if rt.cfg.Settled == nil {
		return 0, false
	}
	return rt.cfg.Settled()
}

// settled reports whether block n is at or below the cluster's settled
// line: only such numbers are written through to history, and, while the
// line is known, read from it.
func (rt *Router) settled(n uint64) bool {
	line, ok := rt.settledLine()
	return ok && n <= line
}

// readable reports whether blocks from..to may be read from history by
// number. While the settled line is known: when they are at or below it.
// While it is not (no head yet: a replica just started, its remotes
// down), when the store holds them whole: a stored range was settled when
// it was written, and no head known contradicts it. A head the window
// holds does: with a settled line unknown it is younger than the
// confirmations a stored block needed (a chain started afresh, or other
// settings), so the window and the remotes answer; and so does a remotes'
// head below the range.
func (rt *Router) readable(ctx context.Context, from, to uint64) bool {
	if line, ok := rt.settledLine(); ok {
		return to <= line
	}
	if rt.head != nil {
		if _, ok := rt.head.Tags(); ok {
			return false
		}
	}
	if h := rt.up.HealthyHead(); h > 0 && to > h {
		return false
	}
	covered, err := rt.history.Covered(ctx, from, to)
	return err == nil && whole(covered, from, to)
}

// whole reports whether ranges (ascending, within [from, to], as Covered
// returns them) leave no number of [from, to] out.
func whole(ranges []blockstore.Range, from, to uint64) bool {
	next := from
	for _, r := range ranges {
		if r.From > next {
			return false
		}
		if r.To >= to {
			return true
		}
		next = max(next, r.To+1)
	}
	return false
}

// fromHistory answers a call from the history store when it reads a
// settled block the store holds. missed reports a settled block (or a
// hash) the store did not hold: the remotes' answer is worth writing
// through. A Postgres failure is neither answered nor missed: the remotes
// answer, and the store's own metric and log tell of the outage.
func (rt *Router) fromHistory(ctx context.Context, c *evm.Call) (res json.RawMessage, ok, missed bool) {
	switch c.Kind {
	case evm.KindBlock, evm.KindTxByIndex, evm.KindTxCount, evm.KindUncleCount, evm.KindBlockReceipts:
		if c.BlockAt < 0 {
			break // by hash: only settled blocks are stored, a hash found is settled
		}
		switch {
		case !c.BlockOK:
			return nil, false, false
		case c.Block.Kind == evm.RefNumber && rt.readable(ctx, c.Block.Number, c.Block.Number):
		case c.Block.Kind == evm.RefHash && c.Kind == evm.KindBlockReceipts:
		default:
			// A tag the head window could not pin, a block above the
			// settled line: not history's.
			return nil, false, false
		}
	case evm.KindTx, evm.KindReceipt:
	default:
		return nil, false, false
	}
	res, ok, err := rt.history.Answer(ctx, *c)
	switch {
	case err != nil:
		return nil, false, false
	case ok:
		return res, true, false
	}
	return nil, false, true
}

// errStore marks a history part of a split eth_getLogs that failed: the
// whole call then goes to the remotes.
var errStore = errors.New("history store")

// logs answers eth_getLogs from the history store where its range is
// settled and stored, and the rest of the range from the head window or
// the remotes, merged in block order: the node's answer, in fewer upstream
// calls. done is false when history holds none of it (or failed, or the
// filter is not one geth would read as venn does): the caller forwards the
// call whole, and the node answers, errors included.
func (rt *Router) logs(ctx context.Context, call *evm.Call) (res json.RawMessage, done bool, err error) {
	if !call.Exact {
		return nil, false, nil
	}
	// The parts below share the call: a copy of its own, so that the
	// caller's (on its stack for every other call) stays there.
	c := new(evm.Call)
	*c = *call
	f := &c.Filter
	if f.ByHash {
		res, ok, err := rt.history.Answer(ctx, *c)
		return res, ok && err == nil, nil
	}
	line, known := rt.settledLine()
	if !known {
		// No head to resolve tags or to tell the settled part of a range
		// from the rest: explicit numbers the store holds whole, or none.
		from, to := f.From.Number, f.To.Number
		if f.From.Kind != evm.RefNumber || f.To.Kind != evm.RefNumber || from > to || !rt.readable(ctx, from, to) {
			return nil, false, nil
		}
		res, err := rt.history.Logs(ctx, f, from, to)
		return res, err == nil, nil
	}
	from, to, ok := rt.logRange(f.From, f.To)
	if !ok || from > line {
		return nil, false, nil
	}
	covered, cerr := rt.history.Covered(ctx, from, min(to, line))
	if cerr != nil || len(covered) == 0 {
		return nil, false, nil
	}
	parts := logParts(from, to, covered)
	out := make([]json.RawMessage, len(parts))
	notes := jrpc.NewBranches(ctx, len(parts)) // the upstream parts note their remotes
	defer notes.Merge(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(logsConcurrency)
	for i, p := range parts {
		gctx := notes.Context(gctx, i)
		g.Go(func() error {
			var err error
			if p.stored {
				if out[i], err = rt.history.Logs(gctx, f, p.from, p.to); err != nil {
					return errors.Join(errStore, err)
				}
				return nil
			}
			if out[i], err = rt.upstreamLogs(gctx, c, p.from, p.to); err == nil && !isArray(out[i]) {
				err = errors.New("eth_getLogs part is not an array")
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if errors.Is(err, errStore) {
			return nil, false, nil
		}
		return nil, true, err
	}
	if len(out) == 1 {
		return out[0], true, nil
	}
	return jsonscan.JoinArrays(out), true, nil
}

// logRange resolves a filter's range to numbers: tags against the head
// window's tags, which only a fresh window may give. ok is false for
// ranges the node would refuse or that venn cannot pin: reversed, above
// the head, pending, earliest (the node's history cutoff).
func (rt *Router) logRange(fromRef, toRef evm.BlockRef) (from, to uint64, ok bool) {
	var tags headstore.Tags
	fresh := rt.fresh()
	if fresh {
		tags, fresh = rt.head.Tags()
	}
	resolve := func(ref evm.BlockRef) (uint64, bool) {
		switch ref.Kind {
		case evm.RefNumber:
			return ref.Number, true
		case evm.RefLatest:
			return tags.Latest, fresh && tags.Latest != 0
		case evm.RefSafe:
			return tags.Safe, fresh && tags.Safe != 0
		case evm.RefFinalized:
			return tags.Finalized, fresh && tags.Finalized != 0
		}
		return 0, false
	}
	from, okFrom := resolve(fromRef)
	to, okTo := resolve(toRef)
	if !okFrom || !okTo || from > to {
		return 0, 0, false
	}
	// A range past the head is the node's to refuse; below the settled
	// line every number exists.
	if !rt.settled(to) && (!fresh || to > tags.Latest) {
		return 0, 0, false
	}
	return from, to, true
}

// logPart is one piece of a split eth_getLogs range: from the store or
// from upstream.
type logPart struct {
	from, to uint64
	stored   bool
}

// logParts cuts [from, to] into the covered ranges (ascending, within
// [from, to]) and the gaps between and after them.
func logParts(from, to uint64, covered []blockstore.Range) []logPart {
	var parts []logPart
	next := from
	for _, c := range covered {
		a, b := max(c.From, from), min(c.To, to)
		if a > b || a < next {
			continue
		}
		if a > next {
			parts = append(parts, logPart{from: next, to: a - 1})
		}
		parts = append(parts, logPart{from: a, to: b, stored: true})
		next = b + 1
		if b == to {
			return parts
		}
	}
	return append(parts, logPart{from: next, to: to})
}

// upstreamLogs answers eth_getLogs over [from, to] from the head window
// when it holds the range, else from the remotes (which split it as they
// must).
func (rt *Router) upstreamLogs(ctx context.Context, c *evm.Call, from, to uint64) (json.RawMessage, error) {
	sub, err := c.WithRange(from, to)
	if err != nil {
		return nil, err
	}
	if rt.fresh() {
		if res, ok := rt.head.Answer(sub); ok {
			return res, nil
		}
	}
	return rt.forward(ctx, &sub)
}

func isArray(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) >= 2 && b[0] == '[' && b[len(b)-1] == ']'
}

// stored answers what the history store and the forger can, and forwards
// (writing through what the store lacked) what they cannot but know of.
// handled is false for calls that are neither's: the caller forwards them.
func (rt *Router) stored(ctx context.Context, req *jrpc.Request, c *evm.Call) (res json.RawMessage, handled bool, err error) {
	if c.Kind == evm.KindHeader || c.Kind == evm.KindUncleByIndex {
		ctx, sp := rt.lookup(ctx, spanForger)
		res, ok := forger.Derive(c, func(b evm.Call) (json.RawMessage, bool) {
			if rt.fresh() {
				if res, ok := rt.head.Answer(b); ok {
					return res, true
				}
			}
			if rt.history == nil {
				return nil, false
			}
			res, ok, _ := rt.fromHistory(ctx, &b)
			return res, ok
		})
		endLookup(sp, ok)
		if ok {
			rt.forged.answered(ctx)
		}
		return res, ok, nil
	}
	missed := false
	if rt.history != nil {
		hctx, sp := rt.lookup(ctx, spanHistory)
		if c.Kind == evm.KindLogs {
			res, done, err := rt.logs(hctx, c)
			endLookup(sp, done)
			if done {
				rt.fromStore.answered(ctx)
			}
			return res, done, err
		}
		res, ok, m := rt.fromHistory(hctx, c)
		endLookup(sp, ok)
		if ok {
			rt.fromStore.answered(ctx)
			return res, true, nil
		}
		missed = m
	}
	var ch *cache.Cache
	if c.Kind == evm.KindBlockReceipts {
		ch = rt.cacheFor(c)
	}
	switch {
	case ch != nil:
		res, err = rt.cachedReceipts(ctx, ch, c)
	case c.Kind == evm.KindBlockReceipts:
		var built bool
		fctx, sp := rt.lookup(ctx, spanForger)
		res, built, err = rt.forge.BlockReceipts(fctx, c)
		endLookup(sp, built)
		if built {
			rt.forged.answered(ctx)
		} else {
			rt.answeredBy(ctx, err, rt.forwarded)
		}
	case missed:
		res, err = rt.forward(ctx, c)
		rt.answeredBy(ctx, err, rt.forwarded)
	default:
		return nil, false, nil
	}
	if err == nil && missed {
		rt.wt.offer(c, res)
	}
	return res, true, err
}

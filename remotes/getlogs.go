package remotes

// Split eth_getLogs: which calls are split, how wide the parts are, and
// the pool's side of a split (its parts sent through selection and the
// judge). The split itself (parts, nesting, the address halving, merging,
// its bounds) is remotes/getlogs.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/getlogs"
	"github.com/venn-gateway/venn/remotes/wire"
)

// tooLargeError: a remote refused an eth_getLogs span as too large
// (getlogs.TooLarge).
type tooLargeError = getlogs.TooLarge

// resultCheck vets a remote's successful result before the pool takes it.
// An error (wrapping wire.ErrBadReply) makes the result a bad reply from that
// remote: the pool fails over.
type resultCheck func(json.RawMessage) error

// getLogs serves eth_getLogs. A range that fits goes out unchanged, byte
// for byte. A wider one is split into parts that run with bounded
// concurrency and merge in order; a part a remote calls too large is split
// again (to the span it suggested, else in half). Every split is bounded:
// the range ends at the best head, the parts of one call (nested splits
// included) are at most GetLogsMaxParts, and the merged result is at most
// the largest reply a remote may send.
func (p *Pool) getLogs(ctx context.Context, params json.RawMessage, cv callView) (json.RawMessage, error) {
	lr := cv.logRange()
	if !cv.logsOK || lr.ByHash || !getlogs.IsFilter(evm.Param(params, 0)) {
		return unwrapTooLarge(p.send(ctx, "eth_getLogs", params, route{}.withView(cv)))
	}
	head := p.heads.Head()
	from, okFrom := getlogs.Resolve(lr.From, head)
	to, okTo := getlogs.Resolve(lr.To, head)
	if head == 0 || !okFrom || !okTo || from > to || from > head {
		// Tags we cannot pin, no head yet, a reversed range, or one that
		// starts above every head: nothing to split, the node answers.
		return unwrapTooLarge(p.send(ctx, "eth_getLogs", params, route{need: from}.withView(cv)))
	}
	// A range ending far above the best head is the node's to refuse (geth:
	// "block range extends beyond current head block"): venn must not
	// answer it with the logs up to the head, or an indexer would move its
	// cursor past blocks it never saw. One call, never split. A few blocks
	// above the head may exist on a remote venn has not heard from since;
	// those are split normally.
	if to > head && to-head > p.conf().MaxLag {
		rt := route{need: from}.withView(cv)
		if v := p.view(); p.selection().widestSpan(&v) == 0 {
			// An uncapped remote is in play: it gives the node's own
			// answer, where a capped one would only say "range too large".
			rt.accept = fits(getlogs.Span(from, to))
		}
		return unwrapTooLarge(p.send(ctx, "eth_getLogs", params, rt))
	}
	end := to
	span := getlogs.Span(from, end)

	var chunk uint64
	v := p.view()
	if widest := p.selection().widestSpan(&v); widest == 0 || span <= widest {
		rt := route{need: end, accept: fits(span)}.withView(cv)
		if lr.To.Kind != evm.RefNumber {
			// toBlock latest or absent: every remote in rotation answers up
			// to its own head, which max_lag keeps close to the best. Asking
			// for the best head would wait on the one remote at the very tip.
			rt.need = 0
			if lr.From.Kind == evm.RefNumber {
				rt.need = from // a remote below fromBlock calls the range invalid
			}
		}
		res, err := p.send(ctx, "eth_getLogs", params, rt)
		var tl *getlogs.TooLarge
		if !errors.As(err, &tl) {
			return res, err
		}
		if span == 1 {
			return unwrapTooLarge(p.logsSplit(params, from, end).ByAddress(ctx, params, from, tl))
		}
		chunk = getlogs.NextSpan(span, tl.Span)
	} else {
		chunk = widest
	}
	if lr.To.Kind != evm.RefNumber {
		// The last part must find a remote: end at the best head among the
		// remotes that can take a call now, not at a busy remote's.
		if h := p.selection().availableHead(p.now()); h >= from && h < end {
			end = h
		}
	}
	return unwrapTooLarge(p.logsSplit(params, from, end).Run(ctx, from, end, chunk))
}

// logsSplit is the split of one client call's filter params over
// [from, to], its parts sent through the pool.
func (p *Pool) logsSplit(params json.RawMessage, from, to uint64) *getlogs.Split {
	cfg := p.conf()
	return getlogs.New(logsParts{p}, params, from, to, getlogs.Limits{
		Concurrency: cfg.GetLogsConcurrency, MaxParts: uint64(cfg.GetLogsMaxParts),
		MaxBytes: p.selection().maxLogsBytes(),
	})
}

// logsParts sends a split's parts: each to a remote whose head reaches its
// last block and whose span cap takes it, failed over like any read.
type logsParts struct{ p *Pool }

var _ getlogs.Sender = logsParts{}

func (l logsParts) Part(ctx context.Context, params json.RawMessage, need, span uint64) (json.RawMessage, error) {
	return l.p.send(ctx, "eth_getLogs", params, route{need: need, accept: fits(span), check: getlogs.Array})
}

func (l logsParts) Cut() { l.p.splits.Inc() }

// maxLogsBytes caps a split's merged result: no more than the largest reply
// one remote may send, so a split never builds what one call could not.
func (s *selector) maxLogsBytes() int64 {
	var n int64
	for _, r := range s.remotes {
		n = max(n, r.cfg.MaxResponseBytes)
	}
	if n <= 0 {
		n = wire.DefaultMaxResponseBytes
	}
	return n
}

// availableHead is the best head among remotes that can take an eth_getLogs
// call now (0 if none).
func (s *selector) availableHead(now time.Time) uint64 {
	var h uint64
	for _, r := range s.remotes {
		if r.available(now) == 0 && r.supports("eth_getLogs") {
			h = max(h, r.Head())
		}
	}
	return h
}

// widestSpan is the largest eth_getLogs span some remote takes in one call
// (0: some remote has no cap).
// Only remotes that could take the call count: an uncapped remote that is
// down, lagging or denied eth_getLogs must not stop the split the capped
// ones need. With none in rotation, every remote counts.
func (s *selector) widestSpan(v *view) uint64 {
	if w, ok := widestOf(s.remotes, func(r *Remote) bool {
		return r.healthy(v.now) && !v.lagging(r) && r.supports("eth_getLogs")
	}); ok {
		return w
	}
	w, _ := widestOf(s.remotes, func(*Remote) bool { return true })
	return w
}

// widestOf is the widest span among the remotes keep accepts (0: one of
// them is uncapped); ok is false when it accepts none.
func widestOf(rs []*Remote, keep func(*Remote) bool) (widest uint64, ok bool) {
	for _, r := range rs {
		if !keep(r) {
			continue
		}
		ok = true
		s := r.maxLogsSpan()
		if s == 0 {
			return 0, true
		}
		widest = max(widest, s)
	}
	return widest, ok
}

func fits(span uint64) func(*Remote) bool {
	return func(r *Remote) bool {
		s := r.maxLogsSpan()
		return s == 0 || span <= s
	}
}

// unwrapTooLarge is the answer to an eth_getLogs venn does not split: a
// too-large answer is the remote's own error.
func unwrapTooLarge(res json.RawMessage, err error) (json.RawMessage, error) {
	var tl *getlogs.TooLarge
	if errors.As(err, &tl) {
		return nil, clientError(tl.Err)
	}
	return res, err
}

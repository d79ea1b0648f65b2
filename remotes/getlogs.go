package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// maxSplitDepth bounds how often one eth_getLogs part is split again after
// "too large" answers; past it the remote's own error is the answer.
const maxSplitDepth = 16

// tooLargeError: a remote refused an eth_getLogs span as too large (or with
// too many results). span is the span it suggested, 0 if it said none.
type tooLargeError struct {
	span   uint64
	reason verdict.Reason
	err    error
}

func (e *tooLargeError) Error() string { return e.err.Error() }
func (e *tooLargeError) Unwrap() error { return e.err }

// resultCheck vets a remote's successful result before the pool takes it.
// An error (wrapping wire.ErrBadReply) makes the result a bad reply from that
// remote: the pool fails over.
type resultCheck func(json.RawMessage) error

// splitHelps reports whether a smaller block range can cure a too-large
// answer to eth_getLogs. Too many addresses or topics, or a request or
// batch over the remote's size cap, stay as large however the range is cut.
func splitHelps(r verdict.Reason) bool {
	switch r {
	case verdict.ReasonRangeTooLarge, verdict.ReasonTooManyResults, verdict.ReasonResponseTooLarge:
		return true
	}
	return false
}

// getLogs serves eth_getLogs. A range that fits goes out unchanged, byte
// for byte. A wider one is split into parts that run with bounded
// concurrency and merge in order; a part a remote calls too large is split
// again (to the span it suggested, else in half). Every split is bounded:
// the range ends at the best head, the parts of one call (nested splits
// included) are at most GetLogsMaxParts, and the merged result is at most
// the largest reply a remote may send.
func (p *Pool) getLogs(ctx context.Context, params json.RawMessage, cv callView) (json.RawMessage, error) {
	lr := cv.logRange()
	if !cv.logsOK || lr.ByHash || !isObject(evm.Param(params, 0)) {
		return unwrapTooLarge(p.send(ctx, "eth_getLogs", params, route{}.withView(cv)))
	}
	head := p.heads.Head()
	from, okFrom := resolve(lr.From, head)
	to, okTo := resolve(lr.To, head)
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
			rt.accept = fits(spanOf(from, to))
		}
		return unwrapTooLarge(p.send(ctx, "eth_getLogs", params, rt))
	}
	end := to
	span := spanOf(from, end)

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
		var tl *tooLargeError
		if !errors.As(err, &tl) {
			return res, err
		}
		if span == 1 {
			return newLogsSplit(p, params, from, end).byAddress(ctx, params, from, tl, 0)
		}
		chunk = nextSpan(span, tl.span)
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
	return newLogsSplit(p, params, from, end).run(ctx, from, end, chunk, 0)
}

// logsSplit is one client call's split eth_getLogs. Its budgets are shared
// by every nesting level: the semaphore holds the parts in flight (held only
// while a part waits on a remote, never while it waits on its own
// sub-parts, so nesting cannot deadlock), parts counts the upstream calls
// planned, bytes the results kept.
type logsSplit struct {
	p        *Pool
	params   json.RawMessage
	span     uint64 // of the whole range, for messages
	sem      chan struct{}
	parts    atomic.Uint64
	bytes    atomic.Int64
	maxParts uint64
	maxBytes int64
}

func newLogsSplit(p *Pool, params json.RawMessage, from, to uint64) *logsSplit {
	return &logsSplit{
		p: p, params: params, span: spanOf(from, to),
		sem:      make(chan struct{}, p.conf().GetLogsConcurrency),
		maxParts: uint64(p.conf().GetLogsMaxParts),
		maxBytes: p.selection().maxLogsBytes(),
	}
}

// run answers [from, to] in parts of at most chunk blocks, merged in order.
// Parts are made as the semaphore lets them start, so a range never sits
// in memory as a list of parts.
func (s *logsSplit) run(ctx context.Context, from, to, chunk uint64, depth int) (json.RawMessage, error) {
	q := (to - from) / chunk // parts - 1: +1 cannot wrap once q < maxParts
	if q >= s.maxParts || s.parts.Add(q+1) > s.maxParts {
		return nil, errPartsOver(s)
	}
	n := q + 1
	s.p.splits.Inc()
	out := make([]json.RawMessage, n)
	notes := jrpc.NewBranches(ctx, int(n)) // n <= getlogs_max_parts
	defer notes.Merge(ctx)
	g, gctx := errgroup.WithContext(ctx)
	next := from
	stopped := false
	for i := range n {
		a, b := next, to
		if to-a >= chunk {
			b = a + chunk - 1
		}
		select {
		case s.sem <- struct{}{}:
		case <-gctx.Done():
			stopped = true
		}
		if stopped {
			break
		}
		g.Go(func() error {
			res, err := s.part(notes.Context(gctx, int(i)), a, b, depth)
			out[i] = res
			return err
		})
		next = b + 1 // wraps only after the last part
	}
	err := g.Wait()
	if (err != nil || stopped) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Whichever part noticed first, the whole split ran out of time:
		// say so, and what to do about it.
		return nil, &timeoutError{msg: "eth_getLogs timed out while split into parts; narrow the range"}
	}
	if err != nil {
		return nil, err
	}
	if stopped {
		return nil, ctx.Err()
	}
	// Every part passed logsArray: none is skipped but empty ones.
	return jsonscan.JoinArrays(out), nil
}

// part answers [a, b]. It holds a semaphore slot on entry and gives it back
// once the remote has answered.
func (s *logsSplit) part(ctx context.Context, a, b uint64, depth int) (json.RawMessage, error) {
	span := spanOf(a, b)
	sub, err := evm.WithRange(s.params, a, b)
	if err != nil {
		<-s.sem
		return nil, fmt.Errorf("eth_getLogs part %d-%d: %w", a, b, err)
	}
	res, err := s.p.send(ctx, "eth_getLogs", sub, route{need: b, accept: fits(span), check: logsArray})
	<-s.sem
	var tl *tooLargeError
	if errors.As(err, &tl) {
		if span == 1 {
			return s.byAddress(ctx, sub, a, tl, depth)
		}
		if depth+1 >= maxSplitDepth {
			return nil, clientError(tl.err) // the remote says best what is wrong
		}
		return s.run(ctx, a, b, nextSpan(span, tl.span), depth+1)
	}
	if err != nil {
		return nil, err
	}
	if s.bytes.Add(int64(len(res))) > s.maxBytes {
		return nil, errBytesOver(s)
	}
	return res, nil
}

// errPartsOver is the answer to a split that would need more than
// getlogs_max_parts upstream calls.
func errPartsOver(s *logsSplit) error {
	return &limitError{msg: fmt.Sprintf(
		"eth_getLogs range of %d blocks needs more than %d parts (getlogs_max_parts); narrow the range",
		s.span, s.maxParts)}
}

// errBytesOver is the answer to a split whose merged result would be
// larger than any remote may send.
func errBytesOver(s *logsSplit) error {
	return &limitError{msg: fmt.Sprintf(
		"eth_getLogs result over %d bytes; narrow the range or filter by address or topics", s.maxBytes)}
}

// logsArray is the resultCheck of a split part: its logs must be a JSON
// array, or they could not be merged and would be lost.
func logsArray(res json.RawMessage) error {
	b := bytes.TrimSpace(res)
	if len(b) >= 2 && b[0] == '[' && b[len(b)-1] == ']' {
		return nil
	}
	return fmt.Errorf("%w: eth_getLogs result is not an array", wire.ErrBadReply)
}

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

// spanOf is the number of blocks in [from, to] (from ≤ to), saturated at
// MaxUint64 rather than wrapping to 0 for the whole uint64 range.
func spanOf(from, to uint64) uint64 {
	if d := to - from; d < math.MaxUint64 {
		return d + 1
	}
	return math.MaxUint64
}

// nextSpan is the part size after a "too large" answer: what the remote
// suggested when it is smaller, else half.
func nextSpan(span, suggested uint64) uint64 {
	if suggested > 0 && suggested < span {
		return suggested
	}
	return max(1, span/2)
}

// unwrapTooLarge is the answer to an eth_getLogs venn does not split: a
// too-large answer is the remote's own error.
func unwrapTooLarge(res json.RawMessage, err error) (json.RawMessage, error) {
	var tl *tooLargeError
	if errors.As(err, &tl) {
		return nil, clientError(tl.err)
	}
	return res, err
}

// resolve pins a block reference to a number against the best head. Tags
// the pool cannot pin (safe, finalized, a hash) report false.
func resolve(ref evm.BlockRef, best uint64) (uint64, bool) {
	switch ref.Kind {
	case evm.RefNumber:
		return ref.Number, true
	case evm.RefNone, evm.RefLatest, evm.RefPending:
		return best, best > 0
	case evm.RefEarliest:
		return 0, true
	}
	return 0, false
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

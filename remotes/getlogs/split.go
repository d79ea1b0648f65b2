package getlogs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/wire"
)

// maxSplitDepth bounds how often one eth_getLogs part is split again after
// "too large" answers; past it the remote's own error is the answer.
const maxSplitDepth = 16

// Sender is how a split reaches the remotes.
type Sender interface {
	// Part sends one part (its filter params) to a remote whose head
	// reaches need and that takes span blocks in one call; an answer that
	// fails Array is a bad reply. A remote's too-large refusal is a
	// *TooLarge.
	Part(ctx context.Context, params json.RawMessage, need, span uint64) (json.RawMessage, error)
	// Cut counts one cut: a range or an address list made into parts.
	Cut()
}

// Limits bound one client call's split, every nesting level included.
type Limits struct {
	Concurrency int    // parts in flight
	MaxParts    uint64 // upstream calls planned
	MaxBytes    int64  // results kept
}

// Split is one client call's split eth_getLogs. Its budgets are shared by
// every nesting level: the semaphore holds the parts in flight (held only
// while a part waits on a remote, never while it waits on its own
// sub-parts, so nesting cannot deadlock), parts counts the upstream calls
// planned, bytes the results kept.
type Split struct {
	send     Sender
	params   json.RawMessage
	span     uint64 // of the whole range, for messages
	sem      chan struct{}
	parts    atomic.Uint64
	bytes    atomic.Int64
	maxParts uint64
	maxBytes int64
}

// New is the split of the filter params over [from, to].
func New(send Sender, params json.RawMessage, from, to uint64, lim Limits) *Split {
	return &Split{
		send: send, params: params, span: Span(from, to),
		sem:      make(chan struct{}, lim.Concurrency),
		maxParts: lim.MaxParts,
		maxBytes: lim.MaxBytes,
	}
}

// Run answers [from, to] in parts of at most chunk blocks, merged in order.
func (s *Split) Run(ctx context.Context, from, to, chunk uint64) (json.RawMessage, error) {
	return s.run(ctx, from, to, chunk, 0)
}

// run is Run at a nesting depth. Parts are made as the semaphore lets them
// start, so a range never sits in memory as a list of parts.
func (s *Split) run(ctx context.Context, from, to, chunk uint64, depth int) (json.RawMessage, error) {
	q := (to - from) / chunk // parts - 1: +1 cannot wrap once q < maxParts
	if q >= s.maxParts || s.parts.Add(q+1) > s.maxParts {
		return nil, s.partsOver()
	}
	n := q + 1
	s.send.Cut()
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
		return nil, &TimeoutError{msg: "eth_getLogs timed out while split into parts; narrow the range"}
	}
	if err != nil {
		return nil, err
	}
	if stopped {
		return nil, ctx.Err()
	}
	// Every part passed Array: none is skipped but empty ones.
	return jsonscan.JoinArrays(out), nil
}

// part answers [a, b]. It holds a semaphore slot on entry and gives it back
// once the remote has answered.
func (s *Split) part(ctx context.Context, a, b uint64, depth int) (json.RawMessage, error) {
	span := Span(a, b)
	sub, err := evm.WithRange(s.params, a, b)
	if err != nil {
		<-s.sem
		return nil, fmt.Errorf("eth_getLogs part %d-%d: %w", a, b, err)
	}
	res, err := s.send.Part(ctx, sub, b, span)
	<-s.sem
	var tl *TooLarge
	if errors.As(err, &tl) {
		if span == 1 {
			return s.byAddress(ctx, sub, a, tl, depth)
		}
		if depth+1 >= maxSplitDepth {
			return nil, tl // the remote says best what is wrong
		}
		return s.run(ctx, a, b, NextSpan(span, tl.Span), depth+1)
	}
	if err != nil {
		return nil, err
	}
	if s.bytes.Add(int64(len(res))) > s.maxBytes {
		return nil, s.bytesOver()
	}
	return res, nil
}

// partsOver is the answer to a split that would need more than
// getlogs_max_parts upstream calls.
func (s *Split) partsOver() error {
	return &LimitError{msg: fmt.Sprintf(
		"eth_getLogs range of %d blocks needs more than %d parts (getlogs_max_parts); narrow the range",
		s.span, s.maxParts)}
}

// bytesOver is the answer to a split whose merged result would be larger
// than any remote may send.
func (s *Split) bytesOver() error {
	return &LimitError{msg: fmt.Sprintf(
		"eth_getLogs result over %d bytes; narrow the range or filter by address or topics", s.maxBytes)}
}

// Array vets a split part's answer: its logs must be a JSON array, or they
// could not be merged and would be lost.
func Array(res json.RawMessage) error {
	b := bytes.TrimSpace(res)
	if len(b) >= 2 && b[0] == '[' && b[len(b)-1] == ']' {
		return nil
	}
	return fmt.Errorf("%w: eth_getLogs result is not an array", wire.ErrBadReply)
}

// Span is the number of blocks in [from, to] (from ≤ to), saturated at
// MaxUint64 rather than wrapping to 0 for the whole uint64 range.
func Span(from, to uint64) uint64 {
	if d := to - from; d < math.MaxUint64 {
		return d + 1
	}
	return math.MaxUint64
}

// NextSpan is the part size after a "too large" answer: what the remote
// suggested when it is smaller, else half.
func NextSpan(span, suggested uint64) uint64 {
	if suggested > 0 && suggested < span {
		return suggested
	}
	return max(1, span/2)
}

// Resolve pins a block reference to a number against the best head. Tags
// a split cannot pin (safe, finalized, a hash) report false.
func Resolve(ref evm.BlockRef, best uint64) (uint64, bool) {
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

// IsFilter reports whether raw (the call's first param) is a filter
// object, the only form a split rewrites.
func IsFilter(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

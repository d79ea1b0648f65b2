package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
)

// maxSplitDepth bounds how often one eth_getLogs part is halved after
// "too large" answers.
const maxSplitDepth = 16

// tooLargeError: a remote refused an eth_getLogs span as too large (or with
// too many results). span is the span it suggested, 0 if it said none.
type tooLargeError struct {
	span uint64
	err  error
}

func (e *tooLargeError) Error() string { return e.err.Error() }
func (e *tooLargeError) Unwrap() error { return e.err }

// getLogs serves eth_getLogs. A range wider than every remote accepts is
// split into parts that run with bounded concurrency and merge in order; a
// part a remote calls too large is halved (or cut to the span it
// suggested). A range that fits goes out unchanged, byte for byte.
func (p *Pool) getLogs(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	lr, err := evm.ParseLogRange(params)
	if err != nil || lr.ByHash {
		return p.do(ctx, "eth_getLogs", params, route{})
	}
	best := p.Head()
	from, okFrom := resolve(lr.From, best)
	to, okTo := resolve(lr.To, best)
	if !okFrom || !okTo || from > to {
		// Tags we cannot pin, or a reversed range: the node answers.
		return p.do(ctx, "eth_getLogs", params, route{})
	}
	span := to - from + 1
	if cap := p.widestSpan(); cap == 0 || span <= cap {
		res, err := p.do(ctx, "eth_getLogs", params, route{need: to, accept: fits(span)})
		var tl *tooLargeError
		if !errors.As(err, &tl) || span == 1 {
			return res, unwrapTooLarge(err)
		}
		return p.split(ctx, params, from, to, nextSpan(span, tl.span), 0)
	} else {
		return p.split(ctx, params, from, to, cap, 0)
	}
}

// split runs [from, to] as parts of at most chunk blocks and merges them.
func (p *Pool) split(ctx context.Context, params json.RawMessage, from, to, chunk uint64, depth int) (json.RawMessage, error) {
	if depth >= maxSplitDepth {
		return nil, fmt.Errorf("eth_getLogs: split %d times and still too large", depth)
	}
	p.splits.Inc()
	var parts [][2]uint64
	for a := from; a <= to; a += chunk {
		b := min(a+chunk-1, to)
		parts = append(parts, [2]uint64{a, b})
		if b == to {
			break
		}
	}
	out := make([]json.RawMessage, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.cfg.GetLogsConcurrency)
	for i, pr := range parts {
		g.Go(func() error {
			res, err := p.logsPart(gctx, params, pr[0], pr[1], depth)
			out[i] = res
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return mergeArrays(out), nil
}

func (p *Pool) logsPart(ctx context.Context, params json.RawMessage, a, b uint64, depth int) (json.RawMessage, error) {
	sub, err := evm.WithRange(params, a, b)
	if err != nil {
		return nil, err
	}
	span := b - a + 1
	res, err := p.do(ctx, "eth_getLogs", sub, route{need: b, accept: fits(span)})
	var tl *tooLargeError
	if errors.As(err, &tl) && span > 1 {
		return p.split(ctx, params, a, b, nextSpan(span, tl.span), depth+1)
	}
	return res, unwrapTooLarge(err)
}

// widestSpan is the largest eth_getLogs span some remote takes in one call
// (0: some remote has no cap).
func (p *Pool) widestSpan() uint64 {
	var widest uint64
	for _, r := range p.remotes {
		s := r.maxLogsSpan()
		if s == 0 {
			return 0
		}
		widest = max(widest, s)
	}
	return widest
}

func fits(span uint64) func(*Remote) bool {
	return func(r *Remote) bool {
		s := r.maxLogsSpan()
		return s == 0 || span <= s
	}
}

// nextSpan is the part size after a "too large" answer: what the remote
// suggested when it is smaller, else half.
func nextSpan(span, suggested uint64) uint64 {
	if suggested > 0 && suggested < span {
		return suggested
	}
	return max(1, span/2)
}

func unwrapTooLarge(err error) error {
	var tl *tooLargeError
	if errors.As(err, &tl) {
		return clientError(tl.err)
	}
	return err
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

// mergeArrays joins JSON arrays in order without decoding their elements.
func mergeArrays(parts []json.RawMessage) json.RawMessage {
	n := 2
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	first := true
	for _, p := range parts {
		p = bytes.TrimSpace(p)
		if len(p) < 2 || p[0] != '[' {
			continue // null or empty
		}
		inner := bytes.TrimSpace(p[1 : len(p)-1])
		if len(inner) == 0 {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		out = append(out, inner...)
		first = false
	}
	return append(out, ']')
}

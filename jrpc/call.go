package jrpc

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Serving one decoded message, for either transport: batches fan out to at
// most BatchConcurrency workers, answers go back in request order, handler
// panics become -32603, and every call is counted and (at debug) logged.

// maxLoggedMethod bounds how much of a client's method name reaches a log.
const maxLoggedMethod = 64

// serveMessage decodes msg, serves its calls under ctx for cl (nil without
// a Gate) and appends the answer to buf. buf comes back unchanged when
// nothing is to be answered (only notifications). Calls of a message that
// beginCalls did not admit are answered CodeShuttingDown; the transport holds
// the admission until the answer is written, so that Shutdown waits for
// answers, not just results. A message the rate limits refuse has every call
// answered with the refusal's error, which is also returned, with a single
// call's note.
func (s *Server) serveMessage(ctx context.Context, ch *chainEntry, cl Caller, msg, buf []byte, admitted bool) ([]byte, served) {
	items, batch, werr := decode(msg, s.lim().MaxBatchItems)
	if werr != nil {
		if werr.Code == CodeLimitExceeded {
			ch.metrics.rejected(limitBatch)
		} else {
			ch.metrics.count(otherMethod, outcomeInvalid)
		}
		s.logCall(ctx, ch, "", werr, 0)
		out := appendError(buf, nil, werr)
		return out, served{werr: werr, in: len(msg), out: len(out) - len(buf)}
	}

	// A batch costs one call per item, taken at once (all or none): it
	// weighs what it makes venn do, and one limiter round trip serves it.
	var refused *Refusal
	if admitted && cl != nil {
		refused = cl.Take(ctx, len(items))
	}
	switch {
	case refused != nil:
		s.answerAll(ctx, ch, items, refused.Err)
	case admitted:
		s.serveItems(ctx, ch, cl, items, batch)
	default:
		s.answerAll(ctx, ch, items, errShuttingDown())
	}

	sv := served{refused: refused, items: items, batch: batch, in: len(msg)}
	if !batch {
		sv.note = &items[0].note
		if !items[0].answered() {
			return buf, sv
		}
		out := appendAnswer(buf, &items[0])
		sv.out = len(out) - len(buf)
		return out, sv
	}
	n, start := 0, len(buf)
	for i := range items {
		if !items[i].answered() {
			continue
		}
		if n == 0 {
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		n++
		before := len(buf)
		buf = appendAnswer(buf, &items[i])
		items[i].out = len(buf) - before
	}
	if n > 0 {
		buf = append(buf, ']')
	}
	sv.out = len(buf) - start
	return buf, sv
}

// served is what serving a message says besides its answer.
type served struct {
	// refused is the rate limits' refusal of every call; nil: admitted.
	refused *Refusal
	// note is a single call's note; nil for a batch, or a message that
	// was invalid as a whole.
	note *Note
	// items are the message's calls, answered; batch says it was one.
	items []item
	batch bool
	// werr answers a message invalid as a whole (it has no items).
	werr *Error
	// in and out are the bytes of the message and of its answer.
	in, out int
}

// charge hands the admitted calls of sv to cl when it meters them. buf,
// empty, is room the caller has for them (nil: none); a message with more
// calls than it holds gets a slice of its own.
func charge(ctx context.Context, ch *chainEntry, cl Caller, sv *served, h *AnswerHeader, buf []Charged) {
	m, ok := cl.(Meter)
	if !ok || sv.refused != nil || sv.werr != nil || len(sv.items) == 0 {
		return
	}
	calls := buf[:0]
	if len(sv.items) > cap(buf) {
		calls = make([]Charged, 0, len(sv.items))
	}
	for i := range sv.items {
		it := &sv.items[i]
		if it.invalid {
			continue
		}
		c := Charged{Method: it.req.Method, Source: it.note.Source, BytesOut: it.out}
		if !sv.batch {
			c.BytesOut = sv.out
		}
		if it.err != nil {
			c.Code = it.err.Code
		}
		calls = append(calls, c)
	}
	if len(calls) > 0 {
		m.Charge(ctx, ch.name, calls, h)
	}
}

// answerAll answers every valid item with e, without calling the handler.
func (s *Server) answerAll(ctx context.Context, ch *chainEntry, items []item, e *Error) {
	for i := range items {
		it := &items[i]
		if it.err == nil {
			it.err = e
		}
		s.record(ctx, ch, it, time.Time{})
	}
}

// serveItems serves every item, at most BatchConcurrency at once. The calling
// goroutine is one of the workers, so a single call starts no goroutine.
func (s *Server) serveItems(ctx context.Context, ch *chainEntry, cl Caller, items []item, batch bool) {
	if !batch {
		s.serveItem(ctx, ch, cl, &items[0], -1) // the common case, without a closure
		return
	}
	workers := min(s.lim().BatchConcurrency, len(items))
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(items) {
				return
			}
			s.serveItem(ctx, ch, cl, &items[i], i)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// serveItem calls the handler for a valid item and records the answer.
// Notifications are served too; only their answer is dropped. A method the
// caller may not call is answered with the Gate's error, and never reaches
// the handler. idx is the item's place in its batch, -1 alone.
func (s *Server) serveItem(ctx context.Context, ch *chainEntry, cl Caller, it *item, idx int) {
	hooked := s.hook != nil && it.err == nil
	if it.err == nil {
		ctx = withNote(ctx, &it.note) // under the hook's context: EndCall reads it
	}
	var info CallInfo
	if hooked {
		info = s.callInfo(ctx, ch, it.req.Method, idx, &it.note)
		ctx = s.hook.StartCall(ctx, info)
	}
	if it.err == nil && cl != nil {
		it.err = cl.Check(it.req.Method, it.req.Params)
	}
	var start time.Time
	if it.err == nil {
		if ch.metrics != nil || s.onCall != nil || s.log.Enabled(ctx, slog.LevelDebug) {
			start = time.Now()
		}
		res, err := s.call(ctx, ch, &it.req)
		if err != nil {
			it.err = s.wireError(ctx, ch, &it.req, err)
		} else {
			it.result = res
		}
	}
	s.record(ctx, ch, it, start)
	if hooked {
		s.endCall(ctx, info, it.err)
	}
}

// call runs the handler, turning a panic into -32603 so that one bad call
// neither kills the process nor goes unanswered.
func (s *Server) call(ctx context.Context, ch *chainEntry, req *Request) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.LogAttrs(ctx, slog.LevelError, "rpc handler panic",
				slog.String("chain", ch.name),
				slog.String("method", clip(req.Method, maxLoggedMethod)),
				slog.Any("panic", p),
				slog.String("stack", string(debug.Stack())))
			res, err = nil, errPanic()
		}
	}()
	return ch.h.ServeRPC(ctx, req)
}

// wireError maps a handler's error and logs the detail ToWire hides.
func (s *Server) wireError(ctx context.Context, ch *chainEntry, req *Request, err error) *Error {
	e, unknown := toWire(err)
	if unknown {
		level := slog.LevelError
		if ctx.Err() != nil {
			level = slog.LevelDebug // the client left; its call failing is expected
		}
		s.log.LogAttrs(ctx, level, "rpc call failed",
			slog.String("chain", ch.name),
			slog.String("method", clip(req.Method, maxLoggedMethod)),
			slog.Any("err", err))
	}
	return e
}

// record counts and logs one answered (or notification) item. start is zero
// for items that never reached the handler.
func (s *Server) record(ctx context.Context, ch *chainEntry, it *item, start time.Time) {
	var d time.Duration
	if !start.IsZero() {
		d = time.Since(start)
		it.took = d
	}
	if ch.metrics != nil {
		o := outcomeOf(it.err)
		if start.IsZero() {
			ch.metrics.count(otherMethod, o)
		} else {
			ch.metrics.observe(s.label(it.req.Method), o, d)
		}
	}
	s.logCall(ctx, ch, it.req.Method, it.err, d)
}

func (s *Server) logCall(ctx context.Context, ch *chainEntry, method string, e *Error, d time.Duration) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	code := 0
	if e != nil {
		code = e.Code
	}
	s.log.LogAttrs(ctx, slog.LevelDebug, "rpc call",
		slog.String("chain", ch.name),
		slog.String("method", clip(method, maxLoggedMethod)),
		slog.Duration("duration", d),
		slog.Int("code", code))
}

// label bounds a method name for metrics.
func (s *Server) label(method string) string {
	if s.methodLabel == nil {
		return otherMethod
	}
	if l := s.methodLabel(method); l != "" {
		return l
	}
	return otherMethod
}

// beginCalls admits a message's calls unless the server is shutting down;
// each true is paired with one endCalls once the answer is written. The read
// lock orders it against Shutdown: once Shutdown holds the lock, no call
// starts that it would not wait for.
func (s *Server) beginCalls() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closing.Load() {
		return false
	}
	s.inflight.Add(1)
	return true
}

func (s *Server) endCalls() {
	if s.inflight.Add(-1) == 0 && s.closing.Load() {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

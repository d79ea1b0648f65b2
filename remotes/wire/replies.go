package wire

// Reading upstream replies with bounded memory.
//
// A reply is read in chunks as its bytes arrive, never into a buffer that
// doubles: the cap (max_response_bytes) is checked before each read, so a
// reply over it stops there, and a Content-Length sizes the buffer exactly
// or refuses the reply before a byte of it is read. Compressed replies are
// capped twice, on the wire and inflated, so a gzip bomb stops at the cap.
// And the bytes of every reply being read in the process share one budget
// (limits.max_reply_bytes_in_flight): past it a reply waits briefly for
// others to finish, then fails with ErrReplyBudget.

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

const (
	// replyBudgetWait bounds how long a reply waits for budget. It is
	// short: the reply holds a connection, and perhaps part of the budget,
	// while it waits.
	replyBudgetWait = time.Second
	// replyChunk is the unit a reply of unknown length is read in. Chunks
	// are pooled; a reply of more than one is copied once into a buffer of
	// its exact size when it ends.
	replyChunk = 64 << 10
	// statusReadMax is how much of a non-2xx body is read: it is a JSON-RPC
	// error object or a proxy's page, and only its start is kept.
	statusReadMax = 64 << 10
	// pooledChunks is how many chunks of one reply go back to the pool: an
	// ordinary reply's. A huge reply's other chunks are left to the
	// collector, so that its memory does not stay in the pool after it.
	pooledChunks = 4
	// bigReply: a reply at least this large, once its call is done, has the
	// memory it held handed back to the OS (ReplyBudget.release), at most
	// once per releaseEvery and releaseDelay after it (its caller writes
	// the answer meanwhile). An idle process would otherwise keep it for
	// minutes: nothing else makes the collector run.
	bigReply     = 16 << 20
	releaseDelay = time.Second
	releaseEvery = 10 * time.Second
)

// Errors of readReply; transports turn them into their own errors.
var (
	errOverCap   = errors.New("reply over its cap")
	errNotObject = errors.New("reply is not a JSON object")
)

// ReplyBudget bounds the bytes of upstream replies being read at once,
// across every remote and chain it is given to (NewPool; the app shares
// one per process). A reply takes budget for its bytes as they arrive, or
// for its Content-Length at once, and gives it back when its call returns
// the result; the result then belongs to the caller. A reply read without
// a Content-Length is copied from its chunks into one buffer when it ends,
// so for that moment it takes twice its size in memory; the budget counts
// its bytes once. It is safe for concurrent use.
//
// Unlike a FIFO semaphore, a small reply is never queued behind a big one
// waiting for room: the hot path is one atomic add.
type ReplyBudget struct {
	size int64
	wait time.Duration
	used atomic.Int64

	mu      sync.Mutex
	freed   chan struct{} // closed and replaced when budget comes back while someone waits
	waiters atomic.Int32

	releasing   atomic.Bool  // a release is scheduled
	lastRelease atomic.Int64 // unix nanos of the last release
	releases    atomic.Int64 // releases done, for tests

	inUse     prometheus.Gauge
	exhausted prometheus.Counter
}

// NewReplyBudget returns a budget of size bytes (when size <= 0,
// jrpc.DefaultReplyBytesInFlight: a quarter of the process's memory limit,
// at most 1 GiB). inUse follows the bytes taken and exhausted counts the
// replies left unread for want of budget; either may be nil.
func NewReplyBudget(size int64, inUse prometheus.Gauge, exhausted prometheus.Counter) *ReplyBudget {
	if size <= 0 {
		size = jrpc.DefaultReplyBytesInFlight()
	}
	if inUse == nil {
		inUse = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unregistered"})
	}
	if exhausted == nil {
		exhausted = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	return &ReplyBudget{size: size, wait: replyBudgetWait, freed: make(chan struct{}),
		inUse: inUse, exhausted: exhausted}
}

// Size is the budget in bytes.
func (b *ReplyBudget) Size() int64 { return b.size }

func (b *ReplyBudget) tryTake(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.size {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			b.inUse.Add(float64(n))
			return true
		}
	}
}

// take takes n bytes of budget, waiting at most b.wait for them. Its error
// is ctx's when ctx ends first, else ErrReplyBudget. A nil budget is
// unlimited.
func (b *ReplyBudget) take(ctx context.Context, n int64) error {
	if b == nil || b.tryTake(n) {
		return nil
	}
	if n > b.size {
		b.exhausted.Inc()
		return ErrReplyBudget
	}
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		// Registering before the retry means a give after it sees the
		// waiter and wakes it: no release is missed.
		b.mu.Lock()
		freed := b.freed
		b.waiters.Add(1)
		b.mu.Unlock()
		ok := b.tryTake(n)
		if !ok {
			select {
			case <-freed:
			case <-timer.C:
				b.waiters.Add(-1)
				b.exhausted.Inc()
				return ErrReplyBudget
			case <-ctx.Done():
				b.waiters.Add(-1)
				return ctx.Err()
			}
		}
		b.waiters.Add(-1)
		if ok {
			return nil
		}
	}
}

// give returns n bytes taken with take.
func (b *ReplyBudget) give(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.used.Add(-n)
	b.inUse.Sub(float64(n))
	if n >= bigReply && b.releasing.CompareAndSwap(false, true) {
		time.AfterFunc(releaseDelay, b.release)
	}
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// release hands the memory of big replies back to the OS: a collection,
// then every free page returned (debug.FreeOSMemory). It runs on a timer
// after a big reply's call is done, never more often than releaseEvery,
// and not while other big replies are still being read.
func (b *ReplyBudget) release() {
	now := time.Now().UnixNano()
	wait := time.Duration(b.lastRelease.Load() + int64(releaseEvery) - now)
	if b.used.Load() >= bigReply {
		wait = max(wait, releaseDelay)
	}
	if wait > 0 {
		time.AfterFunc(wait, b.release)
		return
	}
	debug.FreeOSMemory()
	b.lastRelease.Store(time.Now().UnixNano())
	b.releases.Add(1)
	b.releasing.Store(false)
}

// replyRead says how one reply is read.
type replyRead struct {
	max    int64        // the reply's cap in bytes
	budget *ReplyBudget // nil: unlimited
	// object: the reply must be a JSON object, so a body whose first byte
	// says otherwise (an HTML page, a bomb of zeros) stops at once.
	object bool
	// truncate: a reply over max is cut there, with no error (a non-2xx
	// body, of which only the start is kept).
	truncate bool
}

type chunk [replyChunk]byte

var chunks = sync.Pool{New: func() any { return new(chunk) }}

// read reads r to its end and returns the reply in a slice of exactly its
// length, owned by the caller, and the budget it took (to give back when
// the caller is done with the reply). Over max, the error is errOverCap
// and data is a copy of the reply's first chunk, whose start may name the
// call it answers; so too when the budget stays full (ErrReplyBudget, or
// ctx's error). A reply that is not an object (with object set) fails with
// errNotObject. r's own errors are returned as they are.
func (rr replyRead) read(ctx context.Context, r io.Reader) (data []byte, taken int64, err error) {
	var (
		inline [4]*chunk
		list   = inline[:0]
		fill   int   // bytes in the last chunk
		total  int64 // bytes read
		looked bool  // the first byte was checked
	)
	defer func() {
		if err != nil {
			rr.budget.give(taken)
			taken = 0
		}
		for _, c := range list[:min(len(list), pooledChunks)] {
			chunks.Put(c)
		}
	}()
	for {
		if len(list) == 0 || fill == replyChunk {
			if len(list) < pooledChunks {
				list = append(list, chunks.Get().(*chunk))
			} else {
				list = append(list, new(chunk))
			}
			fill = 0
		}
		c := list[len(list)-1]
		// One byte past the cap is asked for, to tell a reply at the cap
		// from one over it.
		n, rerr := r.Read(c[fill:min(replyChunk, fill+int(min(rr.max+1-total, replyChunk)))])
		if n > 0 {
			if berr := rr.budget.take(ctx, int64(n)); berr != nil {
				return prefix(list[0][:min(total+int64(n), replyChunk)]), taken, berr
			}
			taken += int64(n)
			fill += n
			total += int64(n)
			if rr.object && !looked {
				if i := firstNonSpace(c[:fill]); i >= 0 {
					if c[i] != '{' {
						return nil, taken, errNotObject
					}
					looked = true
				}
			}
			if total > rr.max {
				if rr.truncate {
					total, fill = rr.max, fill-1
					break
				}
				return prefix(list[0][:min(total, replyChunk)]), taken, errOverCap
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, taken, rerr
		}
	}
	if len(list) == 1 {
		return append([]byte(nil), list[0][:fill]...), taken, nil
	}
	// The copy doubles the reply's memory for a moment. It takes no more
	// budget: waiting for it could fail a reply already read, and the
	// memory is the chunks', back in the pool for the next reply at once.
	data = make([]byte, 0, total)
	for i, c := range list {
		if i == len(list)-1 {
			data = append(data, c[:fill]...)
		} else {
			data = append(data, c[:]...)
		}
	}
	return data, taken, nil
}

// readSized reads a reply of a known length n (at most max) into a buffer
// of exactly n bytes, taking its budget first. A reply that must be an
// object is checked at its first chunk, before the buffer is allocated.
func (rr replyRead) readSized(ctx context.Context, r io.Reader, n int64) (data []byte, taken int64, err error) {
	if err := rr.budget.take(ctx, n); err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			rr.budget.give(n)
			taken = 0
		}
	}()
	var head []byte // the first chunk, when read apart
	if rr.object && n > replyChunk {
		c := chunks.Get().(*chunk)
		defer chunks.Put(c)
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return nil, 0, err
		}
		if i := firstNonSpace(c[:]); i >= 0 && c[i] != '{' {
			return nil, 0, errNotObject
		}
		head = c[:]
	}
	data = make([]byte, n)
	copy(data, head)
	if _, err := io.ReadFull(r, data[len(head):]); err != nil {
		return nil, 0, err
	}
	if rr.object && head == nil {
		if i := firstNonSpace(data); i >= 0 && data[i] != '{' {
			return nil, 0, errNotObject
		}
	}
	return data, n, nil
}

// prefix copies the first bytes of a reply that is not kept, for its id.
func prefix(b []byte) []byte { return append([]byte(nil), b...) }

func firstNonSpace(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return i
		}
	}
	return -1
}

// gzipBody inflates a gzip reply while counting its wire bytes against the
// same cap as the inflated ones: a stream of empty members must not be
// read without end either. It is pooled, with its reader and buffer.
type gzipBody struct {
	wire wireReader
	zr   gzip.Reader
}

var gzipBodies sync.Pool // *gzipBody

// openGzip starts inflating body, whose wire bytes may not exceed max.
// Its error is body's, errOverCap, or a gzip header fault.
func openGzip(body io.Reader, max int64) (*gzipBody, error) {
	g, _ := gzipBodies.Get().(*gzipBody)
	if g == nil {
		g = &gzipBody{wire: wireReader{br: bufio.NewReaderSize(nil, 4096)}}
	}
	g.wire.br.Reset(body)
	g.wire.left, g.wire.err = max, nil
	// The gzip reader reads through wire as a flate.Reader (ReadByte), so
	// it adds no buffer of its own and every byte it takes is counted.
	if err := g.zr.Reset(&g.wire); err != nil {
		err = g.fault(err)
		g.release()
		return nil, err
	}
	return g, nil
}

func (g *gzipBody) Read(p []byte) (int, error) { return g.zr.Read(p) }

// fault is what a read error means: the body's own failure or the wire
// cap (recorded by wire), else a corrupt gzip stream.
func (g *gzipBody) fault(err error) error {
	switch {
	case g.wire.err != nil:
		return g.wire.err
	case err == io.EOF:
		return fmt.Errorf("%w: empty gzip reply", errBadGzip)
	}
	return fmt.Errorf("%w: %w", errBadGzip, err)
}

func (g *gzipBody) release() {
	g.wire.br.Reset(nil)
	gzipBodies.Put(g)
}

var errBadGzip = errors.New("reply gzip stream is corrupt")

// wireReader counts the bytes read from br against left and records the
// first error of the body itself (or errOverCap).
type wireReader struct {
	br   *bufio.Reader
	left int64
	err  error
}

func (w *wireReader) Read(p []byte) (int, error) {
	if w.left < 0 {
		return 0, w.err
	}
	n, err := w.br.Read(p)
	w.count(n)
	if err != nil && err != io.EOF && w.err == nil {
		w.err = err
	}
	if w.left < 0 {
		return n, w.err
	}
	return n, err
}

func (w *wireReader) ReadByte() (byte, error) {
	if w.left < 0 {
		return 0, w.err
	}
	c, err := w.br.ReadByte()
	if err != nil {
		if err != io.EOF && w.err == nil {
			w.err = err
		}
		return 0, err
	}
	w.count(1)
	if w.left < 0 {
		return 0, w.err
	}
	return c, nil
}

func (w *wireReader) count(n int) {
	w.left -= int64(n)
	if w.left < 0 && w.err == nil {
		w.err = errOverCap
	}
}

package subcenter

import (
	"slices"
	"sync"

	"github.com/venn-gateway/venn/jrpc"
)

// conn is one client connection's subscriptions and its queue of
// notifications. The dispatcher only appends to the queue, then writes
// each connection it queued to in one go that never waits for the client
// (TryNotifySubscriptions): a block costs no goroutine per connection.
// Only a connection that cannot take its notifications at once (its
// writer's turn is taken: a reply, or the rest of an earlier write the
// network did not take) gets a writer goroutine, which waits its turn,
// drains the queue and ends; so an idle subscriber costs no goroutine and
// a slow one never holds up the dispatcher. The Center's crew owns the
// writer, and what forgets the connection once it closes (started by the
// connection's AfterClose).
type conn struct {
	center *Center
	n      jrpc.Notifier
	subs   map[string]*sub // guarded by Center.mu
	// filterBytes is what its logs filters count against
	// max_filter_bytes_per_connection; guarded by Center.mu.
	filterBytes int64

	mu      sync.Mutex
	q       []item // waiting: in inline while it fits
	inline  [inlineQueue]item
	bytes   int64
	holds   int  // subscribe replies not yet written: nothing may go before them
	writing bool // the dispatcher or a writer goroutine is draining q
	closed  bool
}

// inlineQueue is how many notifications a connection's queue holds in
// the connection itself: a block's few. A longer queue moves to the heap,
// where its backing array stays; the common one costs no array of its own
// to allocate, keep, and fetch into the cache on each block.
const inlineQueue = 4

type item struct {
	s       *sub
	payload []byte
}

func newConn(c *Center, n jrpc.Notifier) *conn {
	return &conn{center: c, n: n, subs: map[string]*sub{}}
}

// push queues a notification for s and has a writer start when one must;
// false when the queue is full (the caller disconnects the client).
func (cn *conn) push(s *sub, payload []byte) bool {
	ok, start := cn.queue(s, payload)
	if start {
		cn.center.crew.Go(cn.drain) // refused once the Center stopped: nothing is written then
	}
	return ok
}

// queue queues a notification for s; ok is false when the queue is full,
// start true when the caller must now write the queue (drain or
// writeNow): it is marked as being written.
func (cn *conn) queue(s *sub, payload []byte) (ok, start bool) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return true, false
	}
	o := cn.center.options()
	if len(cn.q) >= o.QueueLen || cn.bytes+int64(len(payload)) > o.QueueBytes {
		return false, false
	}
	if cn.q == nil {
		cn.q = cn.inline[:0]
	}
	cn.q = append(cn.q, item{s, payload})
	cn.bytes += int64(len(payload))
	return true, cn.startLocked()
}

// startLocked reports whether a writer must start now, and marks it started.
func (cn *conn) startLocked() bool {
	if cn.writing || cn.holds > 0 || cn.closed || len(cn.q) == 0 {
		return false
	}
	cn.writing = true
	return true
}

// hold keeps the queue from being written until release: a subscribe
// reply is on its way.
func (cn *conn) hold() {
	cn.mu.Lock()
	cn.holds++
	cn.mu.Unlock()
}

// release ends one hold and writes what waited for it.
func (cn *conn) release() {
	cn.mu.Lock()
	cn.holds--
	start := cn.startLocked()
	cn.mu.Unlock()
	if start {
		cn.center.crew.Go(cn.drain) // refused once the Center stopped: nothing is written then
	}
}

// queued is what waits: notifications and bytes.
func (cn *conn) queued() (int, int64) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.q), cn.bytes
}

// close drops the queue; nothing more is written.
func (cn *conn) close() {
	cn.mu.Lock()
	cn.closed = true
	clear(cn.q)
	cn.q, cn.bytes = nil, 0
	cn.mu.Unlock()
}

// batch is the notifications of one write, and their kinds' counts.
type batch struct {
	notes []jrpc.SubscriptionNote
	kinds [numKinds]int
	// The kinds' counts of the writes made with it, for writeEach to count
	// once: the counters are shared by the cores writing.
	tally [numKinds]int
}

// next takes every notification waiting into b, for the writer to write;
// false when there is none (or the queue is held, or closed): the writer
// is done.
func (cn *conn) next(b *batch) bool {
	clear(b.notes)
	b.notes, b.kinds = b.notes[:0], [numKinds]int{}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for {
		if cn.closed || cn.holds > 0 || len(cn.q) == 0 {
			cn.writing = false
			return false
		}
		for _, it := range cn.q {
			cn.bytes -= int64(len(it.payload))
			if it.s.gone.Load() {
				continue // unsubscribed: geth sends nothing after the reply
			}
			b.notes = append(b.notes, jrpc.SubscriptionNote{ID: it.s.id, Result: it.payload})
			b.kinds[it.s.kind]++
		}
		clear(cn.q)
		cn.q = cn.q[:0]
		if len(b.notes) > 0 {
			return true
		}
	}
}

// count counts the notifications written, by kind.
func (c *Center) count(kinds *[numKinds]int) {
	for k, n := range kinds {
		if n > 0 {
			c.m.sent[k].Add(float64(n))
		}
	}
}

// writeNow writes the queue without waiting, for the dispatcher, which
// queued to it and so started it (queue); if the connection cannot take
// it now, a writer goroutine takes over. b is the caller's scratch, and
// tallies what was written.
func (cn *conn) writeNow(b *batch) {
	c := cn.center
	for cn.next(b) {
		ok, err := cn.n.TryNotifySubscriptions(b.notes)
		switch {
		case err != nil:
			c.writeFailed(cn)
			return
		case !ok:
			rest := &batch{notes: slices.Clone(b.notes), kinds: b.kinds}
			c.crew.Go(func() { cn.drainFrom(rest) }) // refused once the Center stopped: nothing is written then
			return
		}
		for k, n := range b.kinds {
			b.tally[k] += n
		}
	}
}

// drain writes the queue until it is empty, held, or the connection ends.
func (cn *conn) drain() { cn.drainFrom(&batch{}) }

// drainFrom writes b, then drains the queue; b may be empty.
func (cn *conn) drainFrom(b *batch) {
	c := cn.center
	for len(b.notes) > 0 || cn.next(b) {
		if err := cn.n.NotifySubscriptions(c.ctx, b.notes); err != nil {
			if c.ctx.Err() == nil {
				c.writeFailed(cn)
			}
			return
		}
		c.count(&b.kinds)
		clear(b.notes)
		b.notes = b.notes[:0]
	}
}

// writeFailed forgets a connection whose write failed: it is gone.
func (c *Center) writeFailed(cn *conn) {
	c.mu.Lock()
	c.dropLocked(cn)
	c.mu.Unlock()
}

package subcenter

import (
	"sync"

	"github.com/venn-gateway/venn/jrpc"
)

// conn is one client connection's subscriptions and its queue of
// notifications. The dispatcher only appends to the queue; a writer
// goroutine, started when there is something to write and gone when the
// queue is empty, drains it, so an idle subscriber costs no goroutine and
// a slow one never holds up the dispatcher. The Center's crew owns the
// writer, and a watcher that forgets the connection once it closes.
type conn struct {
	center *Center
	n      jrpc.Notifier
	subs   map[string]*sub // guarded by Center.mu
	// filterBytes is what its logs filters count against
	// max_filter_bytes_per_connection; guarded by Center.mu.
	filterBytes int64

	mu      sync.Mutex
	q       []item
	head    int // q[head:] are waiting
	bytes   int64
	holds   int  // subscribe replies not yet written: nothing may go before them
	writing bool // a writer goroutine is draining q
	closed  bool
}

// notifyCapacity is a queue's first capacity: a block's few notifications.
const notifyCapacity = 64

type item struct {
	s       *sub
	payload []byte
}

func newConn(c *Center, n jrpc.Notifier) *conn {
	return &conn{center: c, n: n, subs: map[string]*sub{}}
}

// push queues a notification for s; false when the queue is full (the
// caller disconnects the client).
func (cn *conn) push(s *sub, payload []byte) bool {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return true
	}
	o := cn.center.options()
	if len(cn.q)-cn.head >= o.QueueLen || cn.bytes+int64(len(payload)) > o.QueueBytes {
		cn.mu.Unlock()
		return false
	}
	if cn.q == nil {
		cn.q = make([]item, 0, notifyCapacity)
	}
	cn.q = append(cn.q, item{s, payload})
	cn.bytes += int64(len(payload))
	start := cn.startLocked()
	cn.mu.Unlock()
	if start {
		cn.center.crew.Go(cn.drain) // refused once the Center stopped: nothing is written then
	}
	return true
}

// startLocked reports whether a writer must start now, and marks it started.
func (cn *conn) startLocked() bool {
	if cn.writing || cn.holds > 0 || cn.closed || cn.head == len(cn.q) {
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
	return len(cn.q) - cn.head, cn.bytes
}

// close drops the queue; nothing more is written.
func (cn *conn) close() {
	cn.mu.Lock()
	cn.closed = true
	cn.q, cn.head, cn.bytes = nil, 0, 0
	cn.mu.Unlock()
}

// drain writes the queue until it is empty, held, or the connection ends.
func (cn *conn) drain() {
	c := cn.center
	for {
		cn.mu.Lock()
		if cn.closed || cn.holds > 0 || cn.head == len(cn.q) {
			cn.writing = false
			if cn.head == len(cn.q) {
				cn.q, cn.head = cn.q[:0], 0
			}
			cn.mu.Unlock()
			return
		}
		it := cn.q[cn.head]
		cn.q[cn.head] = item{}
		cn.head++
		cn.bytes -= int64(len(it.payload))
		if cn.head >= 1024 && cn.head*2 >= len(cn.q) {
			// Keep a queue that never empties from growing without end.
			n := copy(cn.q, cn.q[cn.head:])
			clear(cn.q[n:])
			cn.q, cn.head = cn.q[:n], 0
		}
		cn.mu.Unlock()

		if it.s.gone.Load() {
			continue // unsubscribed: geth sends nothing after the reply
		}
		if err := cn.n.NotifySubscription(c.ctx, it.s.id, it.payload); err != nil {
			if c.ctx.Err() != nil {
				return // the Center stopped
			}
			c.mu.Lock()
			c.dropLocked(cn)
			c.mu.Unlock()
			return
		}
		c.m.sent[it.s.kind].Inc()
	}
}

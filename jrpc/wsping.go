package jrpc

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// wsPinger finds a WebSocket peer that died without closing: every
// WSPingInterval it pings the peer, and it closes the connection when a
// ping has had half an interval or more without its pong by the next
// tick.
//
// A subscriber at the syscall floor gets one write per block, and a ping
// of its own would add a write and two goroutine wake-ups per connection
// and interval (about a fifth of the CPU of `vennbench subs`). So a
// ping rides with the connection's next notifications, in their write
// (sock.queuePing); only a connection that was sent no notification in the
// last interval is pinged by itself. A peer that sent a message in the last
// interval is alive and is not pinged. No goroutine or timer per
// connection waits meanwhile: the Server's pingWheel ticks them all.
type wsPinger struct {
	c      *wsConn
	bucket int // in the wheel; under its mu

	mu      sync.Mutex
	stopped bool
	seq     uint64 // the last ping's payload
	out     bool   // it waits for its pong: not answered, nor forgotten
	pauses  uint64 // c.pauses when it was made
	reads   uint64 // c.reads at the last tick
	notes   uint64 // the sock's writes of notifications at the last tick

	answered atomic.Uint64 // the payload of the peer's last pong
}

// pong is the library's OnPongReceived.
func (p *wsPinger) pong(_ context.Context, payload []byte) {
	if len(payload) == 8 {
		p.answered.Store(binary.BigEndian.Uint64(payload))
	}
}

// pingBuckets is how many turns a pingWheel's round has: a connection is
// ticked within an interval/pingBuckets of its interval.
const pingBuckets = 32

// pingWheel ticks the pingers of a Server's connections with one goroutine,
// which runs while there are connections: each turn, an interval over
// pingBuckets, ticks one bucket of them, so each connection is ticked once
// an interval.
type pingWheel struct {
	interval func() time.Duration // WSPingInterval, read each turn
	kick     chan struct{}        // capacity 1: the last connection left, the goroutine ends

	mu      sync.Mutex
	buckets [pingBuckets]map[*wsPinger]struct{}
	turn    int // the bucket ticked next
	n       int
	running bool
	batch   []*wsPinger // the turn's; the goroutine's
}

// join has c's pinger ticked from its next interval on.
func (w *pingWheel) join(c *wsConn) {
	p := c.pinger
	p.c = c
	w.mu.Lock()
	defer w.mu.Unlock()
	// The bucket ticked last in this round: a whole interval from now.
	p.bucket = (w.turn + pingBuckets - 1) % pingBuckets
	if w.buckets[p.bucket] == nil {
		w.buckets[p.bucket] = map[*wsPinger]struct{}{}
	}
	w.buckets[p.bucket][p] = struct{}{}
	w.n++
	if !w.running {
		w.running = true
		go w.run()
	}
}

// leave stops c's pinger: no tick runs once it returns.
func (w *pingWheel) leave(c *wsConn) {
	p := c.pinger
	w.mu.Lock()
	if _, ok := w.buckets[p.bucket][p]; ok {
		delete(w.buckets[p.bucket], p)
		if w.n--; w.n == 0 {
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// run turns the wheel until no connection is left.
func (w *pingWheel) run() {
	interval := w.interval()
	t := time.NewTimer(interval / pingBuckets)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.kick:
		}
		w.mu.Lock()
		if w.n == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch := w.batch[:0]
		for p := range w.buckets[w.turn] {
			batch = append(batch, p)
		}
		w.turn = (w.turn + 1) % pingBuckets
		w.mu.Unlock()
		for _, p := range batch {
			p.tick(interval)
		}
		clear(batch)
		w.batch = batch
		interval = w.interval()
		t.Reset(interval / pingBuckets)
	}
}

func (p *wsPinger) tick(interval time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.c
	if p.stopped || c.ctx.Err() != nil || p.judge(interval) {
		return
	}
	p.stopped = true
	c.s.log.LogAttrs(c.ctx, slog.LevelDebug, "websocket peer missed a ping",
		slog.String("chain", c.ch.name))
	// Ending the context closes the connection (serveWS's AfterFunc) in a
	// goroutine of its own: a close handshake already under way makes
	// CloseNow wait for it, up to the library's timeouts, and the wheel's
	// other connections must not.
	c.cancel()
}

// judge looks at the last ping and makes the next; false: the peer missed
// it.
func (p *wsPinger) judge(interval time.Duration) bool {
	c := p.c
	pending, sentAt, notes := c.sock.pingState()
	reads := c.reads.Load()
	readSome := reads != p.reads
	p.reads = reads
	quiet := notes == p.notes // no notifications went out since the last tick
	p.notes = notes
	switch {
	case !p.out || p.answered.Load() == p.seq:
	case c.paused.Load() || c.pauses.Load() != p.pauses || readSome:
		// A paused reader reads no pongs; a peer that sent a message is
		// alive. The ping is forgotten, and its pong ignored.
		c.sock.dropPing()
		p.out = false
	case pending:
		// It waited an interval for a notification to ride with: it goes
		// by itself.
		c.sendPing()
		return true
	case time.Since(sentAt) < interval/2:
		return true // it rode late: the peer gets until the next tick
	default:
		return false
	}
	if readSome {
		return true
	}
	p.seq++
	p.out = true
	p.pauses = c.pauses.Load()
	c.sock.queuePing(p.seq)
	if quiet {
		c.sendPing()
	}
	return true
}

// sendPing writes a queued ping now, if the writer's turn is free; if not,
// the write that has the turn, or the next, carries it.
func (c *wsConn) sendPing() { _, _ = c.TryNotifySubscriptions(nil) }

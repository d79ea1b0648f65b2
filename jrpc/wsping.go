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
// and interval (a tenth of a fan-out's CPU at 10,000 subscribers). So a
// ping rides with the connection's next notifications, in their write
// (sock.queuePing); only a connection that was sent no notification in the
// last interval is pinged by itself. A peer that sent a message in the last
// interval is alive and is not pinged. No goroutine waits meanwhile: the
// ticks are a timer's.
type wsPinger struct {
	c        *wsConn
	interval time.Duration

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	seq     uint64 // the last ping's payload; 0: none yet
	pauses  uint64 // c.pauses when it was made
	reads   uint64 // c.reads at the last tick
	notes   uint64 // the sock's writes of notifications at the last tick

	answered atomic.Uint64 // the payload of the peer's last pong
}

func newWSPinger(interval time.Duration) *wsPinger {
	return &wsPinger{interval: interval}
}

// pong is the library's OnPongReceived.
func (p *wsPinger) pong(_ context.Context, payload []byte) {
	if len(payload) == 8 {
		p.answered.Store(binary.BigEndian.Uint64(payload))
	}
}

// start pings c from now until stop.
func (p *wsPinger) start(c *wsConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.c = c
	p.timer = time.AfterFunc(p.interval, p.tick)
}

// stop ends the ticks; none runs once it returns.
func (p *wsPinger) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
}

func (p *wsPinger) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.c
	if p.stopped || c.ctx.Err() != nil {
		return
	}
	if p.judge() {
		p.timer.Reset(p.interval)
		return
	}
	p.stopped = true
	c.s.log.LogAttrs(c.ctx, slog.LevelDebug, "websocket peer missed a ping",
		slog.String("chain", c.ch.name))
	_ = c.conn.CloseNow()
	c.cancel()
}

// judge looks at the last ping and makes the next; false: the peer missed
// it.
func (p *wsPinger) judge() bool {
	c := p.c
	pending, sentAt, notes := c.sock.pingState()
	reads := c.reads.Load()
	readSome := reads != p.reads
	p.reads = reads
	quiet := notes == p.notes // no notifications went out since the last tick
	p.notes = notes
	switch {
	case p.seq == 0 || p.answered.Load() == p.seq:
	case c.paused.Load() || c.pauses.Load() != p.pauses || readSome:
		// A paused reader reads no pongs; a peer that sent a message is
		// alive. The ping is forgotten, and its pong ignored.
		c.sock.dropPing()
	case pending:
		// It waited an interval for a notification to ride with: it goes
		// by itself.
		c.sendPing()
		return true
	case time.Since(sentAt) < p.interval/2:
		return true // it rode late: the peer gets until the next tick
	default:
		return false
	}
	if readSome {
		return true
	}
	p.seq++
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

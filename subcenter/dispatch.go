// The dispatcher: what subscribers are told when the window changes.

package subcenter

import (
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// sync delivers the difference between the chain subscribers were told and
// the window's.
func (c *Center) sync() {
	canon := c.w.Canonical()
	if len(canon) == 0 {
		return // a window being rebuilt from nothing proves nothing yet
	}
	if c.view == nil {
		// The first chain seen is where subscribers start.
		view := make([]toldBlock, len(canon))
		for i, p := range canon {
			view[i] = toldBlock{Parts: p}
		}
		c.mu.Lock() // a resuming subscriber reads the view under mu
		c.view = view
		c.mu.Unlock()
		c.told.Store(canon[len(canon)-1].Number)
		return
	}
	fork := forkPoint(c.view, canon)
	dropped, kept := c.view[fork:], c.view[:fork]
	added, missed := above(kept, canon)
	if missed > 0 {
		c.m.gaps.Add(float64(missed))
		c.log.Warn("subscribers missed blocks: the window moved past more than it keeps",
			"blocks", missed, "resumed_at", added[0].Number)
		kept = nil // the view stays contiguous: it restarts at the window
	}
	if len(dropped) == 0 && len(added) == 0 {
		return // nothing new, or a rebuilt window still below the chain told
	}
	start := time.Now()
	c.deliver(kept, dropped, added)
	c.writeReady()
	c.m.dispatch.Observe(time.Since(start).Seconds())
	c.told.Store(c.view[len(c.view)-1].Number)
	c.pruneEarly()
}

// earlyHead is a header told ahead of its block.
type earlyHead struct {
	number uint64
	hash   string
	// at is the delivery that told it: every subscription older than
	// that got it.
	at uint64
}

// maxEarly bounds the headers told ahead of the view.
const maxEarly = 64

// earlyAt is the header told ahead at number n, if it has hash.
func (c *Center) earlyAt(n uint64, hash string) *earlyHead {
	for i := range c.early {
		if e := &c.early[i]; e.number == n && e.hash == hash {
			return e
		}
	}
	return nil
}

// pruneEarly forgets the headers told ahead that the view reached: their
// blocks were delivered (and not told again), or others took their
// numbers (and were told).
func (c *Center) pruneEarly() {
	if len(c.view) == 0 {
		return
	}
	top := c.view[len(c.view)-1].Number
	i := 0
	for i < len(c.early) && c.early[i].number <= top {
		i++
	}
	c.early = c.early[i:]
}

// toldHash is the hash of the block or header told at n, if any.
func (c *Center) toldHash(n uint64) (string, bool) {
	for i := len(c.early) - 1; i >= 0; i-- {
		if c.early[i].number == n {
			return c.early[i].hash, true
		}
	}
	if len(c.view) > 0 {
		low := c.view[0].Number
		if top := c.view[len(c.view)-1].Number; n >= low && n <= top {
			return c.view[n-low].Hash, true
		}
	}
	return "", false
}

// tellAhead tells newHeads subscribers the headers announced ahead of the
// window that extend the chain told: a header whose parent is the block or
// header told below it, and that is not told yet. One at a number already
// told ahead replaces that one (geth tells a new head at the same height
// too); one at or below the view's head waits for the window, which
// reorgs the view if it must. Logs never come from a header.
func (c *Center) tellAhead() {
	if len(c.view) == 0 {
		return // where subscribers start is the window's first chain
	}
	ahead := c.w.Ahead()
	if len(ahead) == 0 {
		return
	}
	start := time.Now()
	told := 0
	for _, h := range ahead {
		if h.Number <= c.view[len(c.view)-1].Number {
			continue
		}
		if slices.Contains(c.toldAhead, h.Hash) {
			continue // told once already, whatever replaced it since
		}
		if parent, ok := c.toldHash(h.Number - 1); !ok || parent != h.Parent {
			continue
		}
		c.tellEarly(h.Number, h.Hash, h.Raw)
		told++
	}
	if told == 0 {
		return
	}
	c.writeReady()
	c.m.dispatch.Observe(time.Since(start).Seconds())
}

// tellEarly queues one header told ahead of its block for every newHeads
// subscription, in place of any told ahead at its number or above.
func (c *Center) tellEarly(n uint64, hash string, raw []byte) {
	keep := 0
	for keep < len(c.early) && c.early[keep].number < n {
		keep++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliveries++
	c.early = append(c.early[:keep], earlyHead{number: n, hash: hash, at: c.deliveries})
	if len(c.early) > maxEarly {
		c.early = c.early[len(c.early)-maxEarly:]
	}
	c.toldAhead = append(c.toldAhead, hash)
	if len(c.toldAhead) > maxEarly {
		c.toldAhead = slices.Delete(c.toldAhead, 0, len(c.toldAhead)-maxEarly)
	}
	if len(c.heads) == 0 {
		return
	}
	head := newHead(raw)
	var slow []*conn
	for s := range c.heads {
		if s.had(n) {
			continue
		}
		ok, start := s.c.queue(s, head)
		if !ok {
			slow = append(slow, s.c)
		}
		if start {
			c.ready = append(c.ready, s.c)
		}
	}
	for _, cn := range slow {
		c.dropSlowLocked(cn)
	}
}

// forkPoint is the index in view (the chain told, ascending) of the lowest
// block the window (canon, ascending) proves left the chain: another block
// at its number, or below it one that is not its parent, or above it one
// whose parent it is not. Every told block above that one left with it.
// A told block the window does not reach proves nothing: above a window
// being rebuilt it is not back yet; below the window it is settled. With
// none proven gone, forkPoint is len(view).
func forkPoint(view []toldBlock, canon []*evm.Parts) int {
	low, top := canon[0].Number, canon[len(canon)-1].Number
	for i, v := range view {
		switch n := v.Number; {
		case n >= low && n <= top:
			if canon[n-low].Hash != v.Hash {
				return i
			}
		case n+1 == low:
			if canon[0].Parent != v.Hash {
				return i
			}
		case n == top+1:
			if canon[len(canon)-1].Hash != v.Parent {
				return i
			}
		}
	}
	return len(view)
}

// above is what of canon comes after kept, the part of the chain told that
// is still canonical: the canonical blocks above its head, ascending (none
// while a rebuilt window is still below it), and how many blocks between
// them the window no longer holds.
func above(kept []toldBlock, canon []*evm.Parts) (added []*evm.Parts, missed uint64) {
	low, top := canon[0].Number, canon[len(canon)-1].Number
	next := low
	if len(kept) > 0 {
		next = kept[len(kept)-1].Number + 1
	}
	if next < low {
		missed = low - next
		next = low
	}
	if next > top {
		return nil, 0
	}
	return canon[next-low:], missed
}

// deliver queues the notifications of one change: the logs of dropped
// blocks again, removed, to the subscriptions they were sent to, then each
// added block's head and logs. The connections it started are left in
// c.ready for writeReady. The view becomes kept and added, with the
// delivery count, at once: a resuming subscriber reads both under mu.
func (c *Center) deliver(kept, dropped []toldBlock, added []*evm.Parts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliveries++
	view := make([]toldBlock, 0, len(kept)+len(added))
	view = append(view, kept...)
	for _, p := range added {
		view = append(view, toldBlock{Parts: p, at: c.deliveries})
	}
	if n := c.w.Size(); len(view) > n {
		view = view[len(view)-n:]
	}
	c.view = view
	var slow []*conn
	push := func(s *sub, payload []byte) {
		ok, start := s.c.queue(s, payload)
		if !ok {
			slow = append(slow, s.c)
		}
		if start {
			c.ready = append(c.ready, s.c)
		}
	}
	if c.logs.n > 0 {
		for _, b := range dropped {
			for i := range b.Logs {
				l := &b.Logs[i]
				var removed []byte // built once, for the first match
				c.logs.match(l, b.Number, func(s *sub) {
					if s.since >= b.at && !s.resumed {
						return // it started after this block was sent
					}
					if removed == nil {
						removed = removedLog(l.Raw)
					}
					push(s, removed)
				})
			}
		}
	}
	for _, b := range added {
		if len(c.heads) > 0 {
			// A header told ahead of its block was told to every
			// subscription older than its telling.
			early := c.earlyAt(b.Number, b.Hash)
			var head []byte
			for s := range c.heads {
				if s.had(b.Number) || early != nil && s.since < early.at {
					continue
				}
				if head == nil {
					head = newHead(b.HashOnly)
				}
				push(s, head)
			}
		}
		if c.logs.n > 0 {
			for i := range b.Logs {
				l := &b.Logs[i]
				c.logs.match(l, b.Number, func(s *sub) {
					if !s.had(b.Number) {
						push(s, l.Raw)
					}
				})
			}
		}
	}
	for _, cn := range slow {
		c.dropSlowLocked(cn)
	}
}

// minWriteShard is the fewest connections worth a goroutine of their own
// in writeReady.
const minWriteShard = 256

// writeReady writes the connections deliver queued to, spread over the
// cores, and waits: none of it waits for a client (conn.writeNow).
func (c *Center) writeReady() {
	ready := c.ready
	if n := min(runtime.GOMAXPROCS(0), len(ready)/minWriteShard); n > 1 {
		var wg sync.WaitGroup
		for i := 1; i < n; i++ {
			wg.Go(func() { c.writeEach(ready[i*len(ready)/n : (i+1)*len(ready)/n]) })
		}
		c.writeEach(ready[:len(ready)/n])
		wg.Wait()
	} else {
		c.writeEach(ready)
	}
	clear(ready)
	c.ready = ready[:0]
}

func (c *Center) writeEach(conns []*conn) {
	var b batch
	for _, cn := range conns {
		cn.writeNow(&b)
	}
	c.count(&b.tally)
}

// dropSlowLocked disconnects a connection whose queue overflowed.
func (c *Center) dropSlowLocked(cn *conn) {
	if _, ok := c.conns[cn.n]; !ok {
		return // already dropped
	}
	queued, bytes := cn.queued()
	c.m.slow.Inc()
	c.log.Warn("disconnected a subscriber that could not keep up",
		"subscriptions", len(cn.subs), "queued", queued, "queued_bytes", bytes)
	c.dropLocked(cn)
	cn.n.Disconnect(closeSlow, slowReason)
}

// dropLocked forgets a connection and every subscription on it.
func (c *Center) dropLocked(cn *conn) {
	if _, ok := c.conns[cn.n]; !ok {
		return
	}
	delete(c.conns, cn.n)
	for _, s := range cn.subs {
		c.removeLocked(s)
	}
	cn.close()
}

// removeLocked takes one subscription out of every index.
func (c *Center) removeLocked(s *sub) {
	if s.gone.Swap(true) {
		return
	}
	delete(s.c.subs, s.id)
	c.m.subs[s.kind].Dec()
	switch s.kind {
	case kindHeads:
		delete(c.heads, s)
	case kindLogs:
		c.logs.remove(s)
		s.c.filterBytes -= s.filter.size
		c.m.filterBytes.Sub(float64(s.filter.size))
	case kindPending:
		g := s.group
		delete(g.subs, s)
		if len(g.subs) == 0 {
			g.cancel()
			if c.pending[g.key] == g { // a refused group may have been replaced
				delete(c.pending, g.key)
			}
		}
	}
}

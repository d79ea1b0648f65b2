package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/venn-gateway/venn/jsonscan"
)

// Relay limits.
const (
	// DefaultRelayStartWait bounds how long the first subscriber of a
	// relayed subscription waits for the upstream to be in place: long
	// enough for a WebSocket dial and subscribe, or a filter, on a good
	// remote, so that one no remote can serve is refused; past it the
	// subscription is accepted and the relay keeps trying.
	DefaultRelayStartWait = 5 * time.Second
	// relayRetry spaces the upstream attempts of a group whose relay
	// failed.
	relayRetry = time.Second
	// pendingDedupWindow is how many recent transactions a relay group
	// remembers, so that one the upstream sends again (a filter made
	// again, another remote, a resubscription) reaches no subscriber twice.
	pendingDedupWindow = 4096
)

// Errors a newPendingTransactions subscriber sees when no remote can serve it.
var (
	errPendingUnserved error = &unservedError{
		msg: "newPendingTransactions needs a remote with a ws_url, or one that serves " +
			"eth_newPendingTransactionFilter; this chain has none"}
	errPendingUnsupported error = &unservedError{
		msg: "newPendingTransactions is served by no remote of this chain: none with a ws_url " +
			"has the subscription, and none has eth_newPendingTransactionFilter"}
)

// relayUnsupported reports a Relay's error that says no remote can serve
// the subscription at all.
func relayUnsupported(err error) bool {
	var u interface{ RelayUnsupported() bool }
	return errors.As(err, &u) && u.RelayUnsupported()
}

// relayGroup is one upstream subscription shared by every client
// subscribed with the same params.
type relayGroup struct {
	key    string
	subs   map[*sub]struct{} // guarded by Center.mu
	cancel context.CancelFunc
	seen   recent // guarded by Center.mu

	// ready is closed once the group is settled: its upstream was in place,
	// a subscriber was told yes, or (err set) no remote can serve it.
	ready chan struct{}
	once  sync.Once
	err   error
}

// settle settles the group with err (nil: it serves) and reports whether
// this call did; the first call wins.
func (g *relayGroup) settle(err error) bool {
	first := false
	g.once.Do(func() {
		g.err = err
		close(g.ready)
		first = true
	})
	return first
}

// joinRelayLocked adds s to the group for its params, starting the
// upstream subscription for the first one.
func (c *Center) joinRelayLocked(s *sub) {
	key := string(s.params)
	g := c.pending[key]
	if g == nil {
		ctx, cancel := context.WithCancel(c.ctx)
		g = &relayGroup{key: key, subs: map[*sub]struct{}{}, cancel: cancel,
			seen: newRecent(pendingDedupWindow), ready: make(chan struct{})}
		c.pending[key] = g
		params := s.params
		c.crew.Go(func() { c.runRelay(ctx, g, params) }) // not stopped: add holds mu
	}
	s.group = g
	g.subs[s] = struct{}{}
}

// awaitRelay waits, at most RelayStartWait, until g is settled, and
// returns the error a subscriber of a group no remote can serve gets.
// Past the wait the group is settled as serving: the subscriber is told
// yes, and the relay keeps trying.
func (c *Center) awaitRelay(ctx context.Context, g *relayGroup) error {
	t := time.NewTimer(c.options().RelayStartWait)
	defer t.Stop()
	select {
	case <-g.ready:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.settle(nil)
	if g.err != nil {
		return errPendingUnsupported
	}
	return nil
}

// awaitPending waits for s's relay group to settle (awaitRelay); a
// subscription the group refuses is taken back, with its hold.
func (c *Center) awaitPending(ctx context.Context, s *sub) error {
	err := c.awaitRelay(ctx, s.group)
	if err != nil {
		c.mu.Lock()
		c.removeLocked(s)
		c.mu.Unlock()
		s.c.release()
	}
	return err
}

// runRelay keeps the group's upstream subscription until its last client
// leaves (or the Center stops). A group that no remote can serve, before
// any subscriber was told yes, refuses its subscribers and ends.
func (c *Center) runRelay(ctx context.Context, g *relayGroup, params json.RawMessage) {
	up := func() { g.settle(nil) }
	warned := false
	for ctx.Err() == nil {
		err := c.relay.Relay(ctx, params, up, func(res json.RawMessage) {
			payload := []byte(res) // the relay hands over a result it no longer uses
			c.mu.Lock()
			defer c.mu.Unlock()
			if k := txKey(payload); k != "" && !g.seen.add(k) {
				return // sent already
			}
			var slow []*conn
			for s := range g.subs {
				if !s.c.push(s, payload) {
					slow = append(slow, s.c)
				}
			}
			for _, cn := range slow {
				c.dropSlowLocked(cn)
			}
		})
		if ctx.Err() != nil {
			return
		}
		unsupported := relayUnsupported(err)
		if unsupported && g.settle(err) {
			c.mu.Lock()
			if c.pending[g.key] == g {
				delete(c.pending, g.key) // the next subscriber asks again
			}
			c.mu.Unlock()
			c.log.Warn("newPendingTransactions refused: no remote serves it", "err", err)
			return
		}
		switch {
		case !unsupported:
			c.log.Warn("pending transactions relay failed; retrying", "err", err)
		case !warned:
			// Subscribers were told yes: keep asking, quietly, until a
			// remote has it again.
			warned = true
			c.log.Warn("pending transactions relay: no remote serves it now; retrying", "err", err)
		}
		t := time.NewTimer(relayRetry)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// txKey is what identifies a newPendingTransactions result: the hash, or
// a transaction object's hash ("" for anything else).
func txKey(res []byte) string {
	switch {
	case len(res) > 0 && res[0] == '"':
		return string(res)
	case len(res) > 0 && res[0] == '{':
		return string(jsonscan.Member(res, "hash"))
	}
	return ""
}

// recent remembers the last n keys added, in a ring.
type recent struct {
	set  map[string]struct{}
	ring []string
	next int
}

func newRecent(n int) recent {
	return recent{set: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add remembers k and reports whether it was new.
func (r *recent) add(k string) bool {
	if _, ok := r.set[k]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = k
	r.set[k] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
	return true
}

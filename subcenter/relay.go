package subcenter

import (
	"context"
	"encoding/json"
	"time"
)

// relayGroup is one upstream subscription shared by every client
// subscribed with the same params.
type relayGroup struct {
	key    string
	subs   map[*sub]struct{}
	cancel context.CancelFunc
}

// joinRelayLocked adds s to the group for its params, starting the
// upstream subscription for the first one.
func (c *Center) joinRelayLocked(s *sub) {
	key := string(s.params)
	g := c.pending[key]
	if g == nil {
		ctx, cancel := context.WithCancel(c.ctx)
		g = &relayGroup{key: key, subs: map[*sub]struct{}{}, cancel: cancel}
		c.pending[key] = g
		c.wg.Add(1)
		go c.runRelay(ctx, g, s.params)
	}
	s.group = g
	g.subs[s] = struct{}{}
}

// runRelay keeps the group's upstream subscription until its last client
// leaves (or the Center stops).
func (c *Center) runRelay(ctx context.Context, g *relayGroup, params json.RawMessage) {
	defer c.wg.Done()
	for ctx.Err() == nil {
		err := c.relay.Relay(ctx, params, func(res json.RawMessage) {
			payload := []byte(res) // the relay hands over a result it no longer uses
			c.mu.Lock()
			defer c.mu.Unlock()
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
		c.log.Warn("pending transactions relay failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

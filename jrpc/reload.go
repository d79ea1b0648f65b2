package jrpc

import (
	"github.com/coder/websocket"
)

// What a configuration reload may change on a running Server: its limits
// and its chains. Both are swapped whole, so the hot path only loads a
// pointer.

// lim is the limits in force.
func (s *Server) lim() *Limits { return s.limits.Load() }

// SetLimits puts l (zero fields at their defaults) in force. Requests and
// messages read after it go by l; a WebSocket connection keeps the
// in-flight slots (ws_in_flight) it was opened with.
func (s *Server) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

// chainRemovedReason is what a connection whose chain left during its
// upgrade is closed with.
const chainRemovedReason = "chain removed from the configuration"

// Remove stops serving chain: new requests for it get 404 and its series
// are deleted; its calls in flight finish on its handler; every WebSocket connection to it is closed
// with StatusGoingAway and reason (at most 123 bytes), which ends its
// subscriptions. It reports how many connections it closed; false when
// chain is not served.
func (s *Server) Remove(chain, reason string) (int, bool) {
	s.handleMu.Lock()
	old := s.chains.Load()
	gone := old.byName[chain]
	if gone == nil {
		s.handleMu.Unlock()
		return 0, false
	}
	byName := make(map[string]*chainEntry, len(old.byName))
	for k, v := range old.byName {
		if k != chain {
			byName[k] = v
		}
	}
	s.chains.Store(newChainSet(byName))
	// Before the name can be handled again: its series are then the new
	// chain's.
	gone.metrics.drop()
	s.handleMu.Unlock()

	// A connection upgraded before the swap is either tracked, and found
	// here, or tracked after this look, and trackConn (under the same
	// lock) refuses it: its chain is no longer the one served.
	s.mu.Lock()
	var conns []*wsConn
	for c := range s.conns {
		if c.ch == gone {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Disconnect(int(websocket.StatusGoingAway), reason)
	}
	return len(conns), true
}

// admitted is the Caller a WebSocket connection's messages go by (nil
// without a Gate), swapped whole by Readmit; peer is what their handlers
// find in place of the upgrade's Peer when the key's name changed (nil:
// the upgrade's).
type admitted struct {
	Caller
	peer *Peer
}

// readmitCloseCode is what a connection the Gate no longer admits is
// closed with: policy violation, as for any refusal after the upgrade.
const readmitCloseCode = websocket.StatusPolicyViolation

// Readmit asks the Gate again about every open WebSocket connection, with
// its upgrade request as it came (headers, path key, address): a reload
// put a new configuration in force, and a connection must not keep what
// the old one granted. An admitted connection's next messages go by the
// new Caller (its method lists and rate limits); one refused (its key
// revoked, its chain no longer allowed to the key, its origin no longer
// allowed) is closed with StatusPolicyViolation and the refusal's message
// as the reason: answering its calls with errors would leave its
// subscriptions streaming. A message being served keeps the Caller it
// began with. It reports how many connections it closed.
func (s *Server) Readmit() int {
	if s.gate == nil {
		return 0
	}
	s.mu.Lock()
	// A connection admitted before this but tracked after it sees the
	// new generation and readmits itself (serveWS).
	s.gateGen.Add(1)
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	closed := 0
	for _, c := range conns {
		if reason := c.readmit(); reason != "" {
			c.Disconnect(int(readmitCloseCode), reason)
			closed++
		}
	}
	return closed
}

// readmit asks the Gate about c's upgrade again and puts the answer in
// force; or it says why c may no longer stay.
func (c *wsConn) readmit() (reason string) {
	cl, refused := c.s.gate.Admit(c.req, Admission{Chain: c.ch.name, Transport: TransportWS, PathKey: c.pathKey})
	if refused != nil {
		c.ch.metrics.count(otherMethod, outcomeOf(refused.Err))
		return "configuration reloaded: " + refused.Err.Message
	}
	a := &admitted{Caller: cl}
	if p, _ := PeerFromContext(c.ctx); cl != nil && cl.Key() != p.Key {
		p.Key, p.ClientIP = cl.Key(), cl.ClientIP()
		a.peer = &p
	}
	c.cl.Store(a)
	return ""
}

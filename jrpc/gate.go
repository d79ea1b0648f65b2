package jrpc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
)

// Transports, as Peer.Transport and Admission.Transport name them.
const (
	TransportHTTP = "http"
	TransportWS   = "ws"
)

// A Gate decides who may call what, and how often, before a call reaches a
// chain's Handler; package edge is venn's. The Server asks it at three
// points: once per HTTP request or WebSocket upgrade (Admit, before any
// body is read), once per message (Caller.Take, with the number of calls,
// so a batch is limited all or none), and once per call (Caller.Check).
// Without a Gate every caller may call everything.
type Gate interface {
	// Admit works out the caller of r, or refuses r as a whole.
	Admit(r *http.Request, a Admission) (Caller, *Refusal)
	// KeysInPath reports whether a key may travel as the path's second
	// segment: then /CHAIN/KEY is routed to the chain.
	KeysInPath() bool
}

// Admission is what the Server knows of a request when it asks the Gate.
type Admission struct {
	Chain     string // the configured chain the path names
	Transport string // TransportHTTP or TransportWS (an upgrade)
	PathKey   string // the path's second segment (/CHAIN/KEY); "" without
}

// A Caller is one client as the Gate sees it, for one HTTP request or one
// WebSocket connection.
type Caller interface {
	// Key names the caller's API key ("" without keys); never the key.
	Key() string
	// ClientIP is the client's address as the Gate works it out (behind
	// trusted proxies); invalid when it works none out.
	ClientIP() netip.Addr
	// Take takes calls from the caller's rate limits, or refuses them all.
	Take(ctx context.Context, calls int) *Refusal
	// Check says whether the caller may call method with params (the
	// client's bytes, read only; a scope on contract addresses reads
	// them): nil, or the error to answer the call with instead of calling
	// the handler.
	Check(method string, params json.RawMessage) *Error
}

// Refusal is the Gate's answer to a request or message it does not let
// through: over HTTP, Status (and Retry-After when set); every call of a
// refused message is answered with Err.
type Refusal struct {
	Status     int
	RetryAfter string // seconds; "" for none
	Err        *Error
}

// AddrBucket is what a client address counts under for per-address limits
// (rate limits, max_connections_per_ip): the address itself for IPv4, its
// /64 for IPv6, since an IPv6 client usually holds a whole /64.
func AddrBucket(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "ip:unknown"
	case ip.Is4():
		return "ip:" + ip.String()
	default:
		p, _ := ip.WithZone("").Prefix(64)
		return "ip:" + p.String()
	}
}

// admit asks the Gate about r, or answers r itself with the Gate's
// refusal and returns false. Without a Gate the caller is nil: open.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, ch *chainEntry, transport, pathKey string) (Caller, bool) {
	if s.gate == nil {
		return nil, true
	}
	cl, refused := s.gate.Admit(r, Admission{Chain: ch.name, Transport: transport, PathKey: pathKey})
	if refused == nil {
		return cl, true
	}
	ch.metrics.count(otherMethod, outcomeOf(refused.Err))
	if refused.RetryAfter != "" {
		w.Header().Set("Retry-After", refused.RetryAfter)
	}
	writeHTTPError(w, refused.Status, refused.Err)
	return nil, false
}

// peer builds the Peer a call's handler finds in its context.
func peer(cl Caller, transport string, r *http.Request, id string) *Peer {
	p := new(Peer)
	setPeer(p, cl, transport, r, id)
	return p
}

// setPeer fills p, which the caller allocated (with what else its request
// holds), for peer.
func setPeer(p *Peer, cl Caller, transport string, r *http.Request, id string) {
	*p = Peer{Transport: transport, RemoteAddr: r.RemoteAddr, Header: r.Header, RequestID: id}
	if cl != nil {
		p.ClientIP = cl.ClientIP()
		p.Key = cl.Key()
		if t, ok := cl.(interface{ Tenant() string }); ok {
			p.Tenant = t.Tenant()
		}
	}
}

// Package router is a chain's front door: it decides, per call, which part
// of venn answers it. venn itself answers what it knows from config
// (eth_chainId); subscriptions get a clear error where the transport cannot
// carry them; the head window answers near-head blocks, receipts and logs;
// everything else goes to the remotes pool, with latest, safe and finalized
// pinned to the cluster's numbers. The history store slots in here as it
// lands.
package router

import (
	"context"
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// Config is one chain's routing settings.
type Config struct {
	Chain   string
	ChainID uint64
	// MaxLag is how far the head window may trail the remotes' head and
	// still answer: beyond it the window is stale (its leader is stuck)
	// and calls go to the remotes.
	MaxLag uint64
}

// Head is the chain's head window as the router uses it.
type Head interface {
	// Answer answers a call from the window; ok is false when it cannot.
	Answer(method string, params json.RawMessage) (res json.RawMessage, ok bool)
	// Tags are the cluster's latest, safe and finalized numbers; ok is
	// false while the window is empty.
	Tags() (headstore.Tags, bool)
	// Latest is the head's number; ok is false when the window must not
	// answer (empty, or its feed is lost).
	Latest() (uint64, bool)
	// Monotonic returns the highest of n and every head answered before.
	Monotonic(n uint64) uint64
}

// headOf is what the router needs of the remotes to tell a stale window,
// and a number no remote could answer for: the best head among those in
// rotation.
type headOf interface{ HealthyHead() uint64 }

// Router routes one chain's calls. It implements jrpc.Handler.
type Router struct {
	cfg     Config
	chainID json.RawMessage
	head    Head // nil: no head window
	remotes jrpc.Handler
	upHead  func() uint64 // the remotes' head; nil when they don't say

	local, fromHead, forwarded prometheus.Counter
}

var _ jrpc.Handler = (*Router)(nil)

// New builds a chain's router in front of its remotes; head may be nil.
func New(cfg Config, head Head, remotes jrpc.Handler, m *Metrics) *Router {
	if m == nil {
		m = NewMetrics(nil)
	}
	var upHead func() uint64
	if h, ok := remotes.(headOf); ok {
		upHead = h.HealthyHead
	}
	return &Router{
		upHead:    upHead,
		cfg:       cfg,
		chainID:   json.RawMessage(`"` + evm.Quantity(cfg.ChainID) + `"`),
		head:      head,
		remotes:   remotes,
		local:     m.answers.WithLabelValues(cfg.Chain, "local"),
		fromHead:  m.answers.WithLabelValues(cfg.Chain, "head"),
		forwarded: m.answers.WithLabelValues(cfg.Chain, "remotes"),
	}
}

// errNotifications is geth's answer to eth_subscribe where notifications
// cannot be delivered.
var errNotifications = &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "notifications not supported"}

// ServeRPC answers one call.
func (rt *Router) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	switch req.Method {
	case "eth_chainId":
		// Every remote was verified to be on this chain: no upstream call.
		rt.local.Inc()
		return rt.chainID, nil
	case "eth_subscribe", "eth_unsubscribe":
		rt.local.Inc()
		return nil, errNotifications
	}
	if rt.fresh() {
		if res, ok := rt.head.Answer(req.Method, req.Params); ok {
			rt.fromHead.Inc()
			return res, nil
		}
		if params, ok := rt.pin(req.Method, req.Params); ok {
			pinned := *req
			pinned.Params = params
			req = &pinned
		}
	}
	rt.forwarded.Inc()
	res, err := rt.remotes.ServeRPC(ctx, req)
	if err == nil && req.Method == "eth_blockNumber" && rt.head != nil {
		// A remote behind the window, or behind an answer this replica
		// gave before, must not move a client's head backwards.
		var s string
		if json.Unmarshal(res, &s) == nil {
			if n, err := evm.ParseQuantity(s); err == nil {
				if m := rt.head.Monotonic(n); m != n {
					res = json.RawMessage(`"` + evm.Quantity(m) + `"`)
				}
			}
		}
	}
	return res, err
}

// fresh reports whether the head window may answer: it follows the feed
// and is not more than MaxLag behind the remotes. A stale window could
// miss a reorg; the remotes can't.
func (rt *Router) fresh() bool {
	if rt.head == nil {
		return false
	}
	n, ok := rt.head.Latest()
	if !ok {
		return false
	}
	return rt.upHead == nil || rt.upHead() <= n+rt.cfg.MaxLag
}

// pin rewrites a latest, safe or finalized block parameter to the
// cluster's number for it, so that every replica and every remote answers
// for the same block, whichever remote the call lands on.
func (rt *Router) pin(method string, params json.RawMessage) (json.RawMessage, bool) {
	i, ok := evm.BlockParamIndex(method)
	if !ok {
		return nil, false
	}
	raw := evm.Param(params, i)
	if len(raw) == 0 || raw[0] != '"' {
		// Absent (the node's own default) or an EIP-1898 object: as sent.
		return nil, false
	}
	ref, err := evm.ParseBlockRef(raw)
	if err != nil {
		return nil, false
	}
	tags, ok := rt.head.Tags()
	if !ok {
		return nil, false
	}
	var n uint64
	switch ref.Kind {
	case evm.RefLatest:
		n = tags.Latest
	case evm.RefSafe:
		n = tags.Safe
	case evm.RefFinalized:
		n = tags.Finalized
	}
	if n == 0 || rt.upHead != nil && rt.upHead() < n {
		// No remote in rotation has the block yet: the call keeps its
		// tag rather than fail with "header not found" everywhere.
		return nil, false
	}
	return evm.WithParam(params, i, `"`+evm.Quantity(n)+`"`)
}

// Metrics count where calls were answered.
type Metrics struct {
	answers *prometheus.CounterVec
}

// NewMetrics registers the router's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{answers: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "venn", Name: "answers_total",
		Help: "Calls by where they were answered: local (venn itself), head (the head window) or remotes.",
	}, []string{"chain", "source"})}
	if reg != nil {
		reg.MustRegister(m.answers)
	}
	return m
}

// Package router is a chain's front door: it decides, per call, which part
// of venn answers it. Today that is venn itself for what it knows from
// config (eth_chainId), a clear error for subscriptions where the transport
// cannot carry them, and the remotes pool for everything else. The head
// window, the history store and subscriptions slot in here as they land.
package router

import (
	"context"
	"encoding/json"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// Config is one chain's routing settings.
type Config struct {
	Chain   string
	ChainID uint64
}

// Router routes one chain's calls. It implements jrpc.Handler.
type Router struct {
	cfg     Config
	chainID json.RawMessage
	remotes jrpc.Handler
}

var _ jrpc.Handler = (*Router)(nil)

// New builds a chain's router in front of its remotes.
func New(cfg Config, remotes jrpc.Handler) *Router {
	return &Router{
		cfg:     cfg,
		chainID: json.RawMessage(`"` + evm.Quantity(cfg.ChainID) + `"`),
		remotes: remotes,
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
		return rt.chainID, nil
	case "eth_subscribe", "eth_unsubscribe":
		return nil, errNotifications
	}
	return rt.remotes.ServeRPC(ctx, req)
}

package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
)

// newNATS is the process's one NATS connection (package nats), nil
// without nats.url. It is provided before anything that uses it, so its
// hooks start first and stop last: it connects before the services on
// it subscribe and drains after they have stopped. Connecting never
// waits for a server: NATS being away never holds up HTTP.
func newNATS(lc fx.Lifecycle, cfg *Config, log *slog.Logger, reg *prometheus.Registry) *vnats.Conn {
	if !cfg.NATS.Enabled() {
		return nil
	}
	c := vnats.New(cfg.NATS, "venn "+cfg.replicaID(), log, reg)
	lc.Append(fx.Hook{OnStart: c.Start, OnStop: c.Stop})
	return c
}

type natsRPCParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Conn      *vnats.Conn // nil: no NATS
	RPC       *jrpc.Server
	Chains    *chains
	Reloader  *Reloader
	Log       *slog.Logger
	Registry  *prometheus.Registry
	// Servers are wanted for their order only: the service's hooks come
	// after theirs, so it stops first. NATS hands new requests to the
	// other replicas at once (no shutdown_delay needed) and the requests
	// received finish before the jrpc server drains.
	Servers *servers
}

// serveNATS serves every chain's JSON-RPC over NATS request/reply, with
// the jrpc server that serves HTTP; a reload's added and removed chains
// are served and dropped with it (reload_chains.go).
func serveNATS(p natsRPCParams) {
	if p.Conn == nil || !p.Config.NATS.RPC.On() {
		return
	}
	svc := vnats.NewRPC(p.Conn, p.RPC, p.Log, p.Registry)
	p.Reloader.nats = svc
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			var errs []error
			for _, c := range p.Chains.all() {
				errs = append(errs, svc.Serve(c.Name()))
			}
			return errors.Join(errs...)
		},
		OnStop: svc.Stop,
	})
}

// natsStatus is the connection's state for /readyz; nil without NATS.
func natsStatus(c *vnats.Conn) func() *vnats.Status {
	return func() *vnats.Status {
		if c == nil {
			return nil
		}
		st := c.Status()
		return &st
	}
}

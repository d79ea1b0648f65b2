package app

import (
	"context"
	"log/slog"

	"go.uber.org/fx"

	"github.com/venn-gateway/venn/emerald"
	"github.com/venn-gateway/venn/jrpc"
)

type grpcParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Config     *Config
	RPC        *jrpc.Server
	Chains     *chains
	Log        *slog.Logger
	Build      buildInfoIn
	// Servers are wanted for their order only: the gRPC server's hooks
	// come after theirs, so it stops first, its calls finishing before
	// the jrpc server drains.
	Servers *servers
}

// newGRPC serves Dshackle's gRPC API (package emerald) on grpc_listen with
// the jrpc server that serves HTTP, the tls section's TLS and the edge's
// key header; nil without grpc_listen. The chains are read at every call:
// a reload's chains are served at once.
func newGRPC(p grpcParams) (*emerald.Server, error) {
	cfg := p.Config
	if cfg.GRPCListen == "" {
		return nil, nil
	}
	opts := emerald.Options{Addr: cfg.GRPCListen, KeyHeader: cfg.Edge.Auth.Header,
		MaxItems: cfg.JRPCLimits().MaxBatchItems, Version: p.Build.Build.versionOrUnknown(), Log: p.Log}
	if cfg.TLS.Enabled() {
		tc, err := cfg.TLS.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts.TLS = tc
	}
	srv := emerald.New(cfg.GRPC, opts, p.RPC, p.Chains.emerald)
	p.Servers.grpc.Store(srv)
	fail := func() { _ = p.Shutdowner.Shutdown(fx.ExitCode(1)) }
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return srv.Start(ctx, fail) },
		OnStop:  srv.Stop,
	})
	return srv, nil
}

// emerald lists the chains served now as the gRPC API sees them.
func (cs *chains) emerald() []emerald.Chain {
	all := cs.all()
	out := make([]emerald.Chain, len(all))
	for i, c := range all {
		cc, pool := c.Config(), c.Pool()
		out[i] = emerald.Chain{Name: c.Name(), ChainID: cc.ChainID, GRPCID: cc.GRPCID,
			Remotes: pool.Status, Ready: pool.Ready, Window: c.Window(), Head: func() (uint64, bool) {
				if n, ok := c.WindowHead(); ok {
					return n, true
				}
				h := pool.Heads().Head()
				return h, h > 0
			}}
	}
	return out
}

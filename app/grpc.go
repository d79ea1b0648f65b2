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
	Gate       *gate
	Log        *slog.Logger
	Build      buildInfoIn
	// Servers are wanted for their order only: the gRPC server's hooks
	// come after theirs, so it stops first, its calls finishing before
	// the jrpc server drains.
	Servers *servers
}

// newGRPC serves Dshackle's gRPC API (package emerald) on grpc_listen with
// the jrpc server that serves HTTP, the tls section's TLS and the edge's
// key header; nil without grpc_listen. The chains are read at every call,
// and the open streams told of each reload (grpcTable): a reload's chains
// are served at once.
func newGRPC(p grpcParams) (*emerald.Server, error) {
	cfg := p.Config
	if cfg.GRPCListen == "" {
		return nil, nil
	}
	opts := emerald.Options{Addr: cfg.GRPCListen, KeyHeader: cfg.Edge.Auth.Header,
		MaxItems: cfg.JRPCLimits().MaxBatchItems, Version: p.Build.Build.versionOrUnknown(), Log: p.Log,
		// The edge in force decides, as it does the calls.
		Permitted: func(ctx context.Context, in jrpc.Inbound, methods []string) []string {
			return p.Gate.load().Permitted(in.GateRequest(ctx), jrpc.Admission{Chain: in.Chain, Transport: in.Transport}, methods)
		},
		Admit: func(ctx context.Context, in jrpc.Inbound) *jrpc.Refusal {
			return p.Gate.load().Admitted(in.GateRequest(ctx), jrpc.Admission{Chain: in.Chain, Transport: in.Transport})
		},
		Take: func(ctx context.Context, in jrpc.Inbound) *jrpc.Refusal {
			return p.Gate.load().TakeOne(in.GateRequest(ctx), jrpc.Admission{Chain: in.Chain, Transport: in.Transport})
		}}
	if cfg.TLS.Enabled() {
		tc, err := cfg.TLS.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts.TLS = tc
	}
	srv := emerald.New(cfg.GRPC, opts, p.RPC, grpcTable{p.Chains})
	p.Servers.grpc.Store(srv)
	fail := func() { _ = p.Shutdowner.Shutdown(fx.ExitCode(1)) }
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return srv.Start(ctx, fail) },
		OnStop:  srv.Stop,
	})
	return srv, nil
}

// grpcTable is the chains as the gRPC API reads them.
type grpcTable struct{ cs *chains }

var _ emerald.Table = grpcTable{}

func (t grpcTable) Changed() <-chan struct{} { return t.cs.listChanged() }

// Chains lists the chains served now as the gRPC API sees them.
func (t grpcTable) Chains() []emerald.Chain {
	all := t.cs.all()
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

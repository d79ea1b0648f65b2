package app

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/reqlog"
)

// newRequestLog is the request log, nil when request_log.enabled is
// false. It is built before the JSON-RPC server, whose hook it feeds, so
// it stops after the server has drained: the last calls' lines are
// written.
func newRequestLog(lc fx.Lifecycle, cfg *Config, log *slog.Logger, reg *prometheus.Registry) *reqlog.Log {
	if !cfg.RequestLog.Enabled {
		return nil
	}
	l := reqlog.New(cfg.RequestLog, nil, log, reg, integrity.SentTxHash)
	lc.Append(fx.Hook{OnStart: l.Start, OnStop: l.Stop})
	return l
}

// onCall is the server's per-call hook: the request log's, or none.
func onCall(l *reqlog.Log) func(jrpc.Call) {
	if l == nil {
		return nil
	}
	return l.Record
}

package app

import (
	"log/slog"
	"strings"

	"go.uber.org/fx"

	"github.com/venn-gateway/venn/jrpc"
)

type buildInfoIn struct {
	fx.In
	Build BuildInfo `optional:"true"`
}

// logStart logs what this process is: its version and config file, then
// one line per chain naming its URL path, its remotes by name and tier,
// and the stores it uses. Never a URL: remotes by name only.
func logStart(cfg *Config, cs *chains, log *slog.Logger, b buildInfoIn) {
	file := cfg.File
	if file == "" {
		file = "built-in default"
	}
	memLimit, memSource := jrpc.MemoryLimit()
	log.Info("venn", "version", b.Build.versionOrUnknown(), "config", file, "replica", cfg.replicaID(),
		"reply_bytes_in_flight", cfg.Limits.MaxReplyBytesInFlight, "memory_limit", memLimit, "memory_limit_source", memSource)
	head, history := "memory", "off"
	if t, err := cfg.Redis.target(); cs.rdb != nil && err == nil {
		head = "redis " + t.kind // server, sentinel or cluster
	}
	if cfg.Postgres.URL != "" {
		history = "postgres"
	}
	for _, cc := range cfg.Chains {
		rs := make([]string, len(cc.Remotes))
		for i, r := range cc.Remotes {
			rs[i] = r.Name + " (" + r.Tier.String() + ")"
		}
		log.Info("chain", "chain", cc.Name, "chain_id", cc.ChainID, "path", "/"+cc.Name,
			"remotes", strings.Join(rs, ", "), "head_store", head, "history_store", history)
	}
}

// versionOrUnknown is the version, "unknown" when the binary did not say.
func (b BuildInfo) versionOrUnknown() string {
	if b.Version == "" {
		return "unknown"
	}
	return b.Version
}

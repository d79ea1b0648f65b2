package app

import (
	"fmt"
	"os"
	"time"

	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/stalker"
)

// applyDefaults fills every zero field with its documented default. The
// packages decide their own sections' defaults (WithDefaults); this is the
// only place the rest are decided.
func (c *Config) applyDefaults() {
	setDefault(&c.Listen, DefaultListen)
	if c.MetricsListen == nil {
		addr := DefaultMetricsListen
		c.MetricsListen = &addr
	}
	setDefault(&c.Log.Level, DefaultLogLevel)
	setDefault(&c.Log.Format, DefaultLogFormat)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)

	c.Limits = c.Limits.WithZeroDefaults()
	c.RequestLog = c.RequestLog.WithDefaults()
	c.Compression = c.Compression.WithDefaults()
	c.Edge = c.Edge.WithDefaults()
	c.Admin = c.Admin.WithDefaults()
	c.NATS = c.NATS.WithDefaults()
	if c.Redis.Enabled() {
		setDefault(&c.Redis.LeaseTTL, stalker.DefaultLeaseTTL)
		if c.Redis.ReplicaID == "" {
			host, _ := os.Hostname()
			c.Redis.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
	}
	for i := range c.Chains {
		applyChainDefaults(&c.Chains[i], c.Redis.Enabled())
	}
	c.applyPostgresDefaults()
}

func applyChainDefaults(ch *ChainConfig, redis bool) {
	ch.Pool = ch.Pool.WithDefaults(len(ch.Remotes))
	ch.Head = ch.Head.WithDefaults(ch.Pool.BlockTime)
	ch.History = ch.History.WithDefaults(ch.Head.Window)
	if ch.Integrity.Stalker == nil {
		on := true
		ch.Integrity.Stalker = &on
	}
	for j := range ch.Remotes {
		ch.Remotes[j] = ch.Remotes[j].WithDefaults(ch.Pool.CallDeadline)
	}
	blockTime := ch.Pool.BlockTime
	if blockTime == 0 {
		blockTime = remotes.DefaultBlockTime // until learnt
	}
	ch.Cache = ch.Cache.WithDefaults(blockTime, redis)
	ch.GetLogsLimits = ch.GetLogsLimits.WithDefaults()
	ch.Filters = ch.Filters.WithDefaults()
}

// applyPostgresDefaults runs after the chains' defaults: the read timeout
// fits inside every chain's call deadline.
func (c *Config) applyPostgresDefaults() {
	var shortest time.Duration
	for _, ch := range c.Chains {
		if d := ch.Pool.CallDeadline; d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	c.Postgres = c.Postgres.WithDefaults(shortest)
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

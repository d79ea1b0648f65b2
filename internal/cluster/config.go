package cluster

import (
	"fmt"
	"strings"
	"time"
)

// Config is one replica's venn.yaml: its listeners, the shared Redis, and
// one chain in front of the remotes.
type Config struct {
	Listen        string // host:port
	MetricsListen string // host:port
	RedisAddr     string
	// Redis, when set, is the redis section's fields instead of a url to
	// RedisAddr, in YAML flow style: `cluster: ["127.0.0.1:7000"]`.
	Redis     string
	ReplicaID string
	LeaseTTL  time.Duration // redis: {lease_ttl: ...}; 0 keeps venn's default
	Chain     string
	ChainID   uint64
	BlockTime time.Duration
	Window    int // head: {window: ...}
	Remotes   []Remote
	// Extra is top-level YAML written as is: limits, shutdown_timeout.
	Extra string
	// ChainExtra is more of the chain's fields, one a line, written
	// under it: "cache: {memory_bytes: 1000000}".
	ChainExtra string
	// MoreChains are served too, with the first chain's block time and
	// window.
	MoreChains []Chain
}

// Chain is one more chain of a Config.
type Chain struct {
	Name    string
	ChainID uint64
	Remotes []Remote
}

// Remote is one of the chain's remotes; zero fields keep venn's defaults.
type Remote struct {
	Name, URL, WSURL string
	Timeout          time.Duration
	MaxInFlight      int
	// Extra is more of the remote's fields, in YAML flow style:
	// "weight: 3, budget: {calls: 100, per: day}".
	Extra string
}

// YAML is the configuration file's text. Logs are at info, which venn uses
// for events (elections, feed breaks), never per call: when leadership
// moves, a replica's log says why.
func (c Config) YAML() string {
	var y strings.Builder
	fmt.Fprintf(&y, "listen: %s\nmetrics_listen: %s\nlog: {level: info}\n", c.Listen, c.MetricsListen)
	if c.Extra != "" {
		y.WriteString(strings.TrimSuffix(c.Extra, "\n") + "\n")
	}
	redis := c.Redis
	if redis == "" {
		redis = fmt.Sprintf("url: \"redis://%s/0\"", c.RedisAddr)
	}
	fmt.Fprintf(&y, "redis: {%s, replica_id: %s", redis, c.ReplicaID)
	if c.LeaseTTL > 0 {
		fmt.Fprintf(&y, ", lease_ttl: %s", c.LeaseTTL)
	}
	y.WriteString("}\n")
	y.WriteString("chains:\n")
	c.chainYAML(&y, Chain{Name: c.Chain, ChainID: c.ChainID, Remotes: c.Remotes}, c.ChainExtra)
	for _, ch := range c.MoreChains {
		c.chainYAML(&y, ch, "")
	}
	return y.String()
}

// chainYAML writes ch as an entry of chains, with extra's lines.
func (c Config) chainYAML(y *strings.Builder, ch Chain, extra string) {
	fmt.Fprintf(y, "  - name: %s\n    chain_id: %d\n    block_time: %s\n    head: {window: %d}\n",
		ch.Name, ch.ChainID, c.BlockTime, c.Window)
	for line := range strings.SplitSeq(strings.TrimSuffix(extra, "\n"), "\n") {
		if line != "" {
			y.WriteString("    " + line + "\n")
		}
	}
	y.WriteString("    remotes:\n")
	for _, r := range ch.Remotes {
		fmt.Fprintf(y, "      - {name: %s, url: %q", r.Name, r.URL)
		if r.WSURL != "" {
			fmt.Fprintf(y, ", ws_url: %q", r.WSURL)
		}
		if r.Timeout > 0 {
			fmt.Fprintf(y, ", timeout: %s", r.Timeout)
		}
		if r.MaxInFlight > 0 {
			fmt.Fprintf(y, ", max_in_flight: %d", r.MaxInFlight)
		}
		if r.Extra != "" {
			y.WriteString(", " + r.Extra)
		}
		y.WriteString("}\n")
	}
}

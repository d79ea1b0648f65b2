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
	ReplicaID     string
	Chain         string
	ChainID       uint64
	BlockTime     time.Duration
	Window        int // head: {window: ...}
	Remotes       []Remote
	// Extra is top-level YAML written as is: limits, shutdown_timeout.
	Extra string
	// ChainExtra is more of the chain's fields, one a line, written
	// under it: "cache: {memory_bytes: 1000000}".
	ChainExtra string
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
	fmt.Fprintf(&y, "redis: {url: \"redis://%s/0\", replica_id: %s}\n", c.RedisAddr, c.ReplicaID)
	fmt.Fprintf(&y, "chains:\n  - name: %s\n    chain_id: %d\n    block_time: %s\n    head: {window: %d}\n",
		c.Chain, c.ChainID, c.BlockTime, c.Window)
	for line := range strings.SplitSeq(strings.TrimSuffix(c.ChainExtra, "\n"), "\n") {
		if line != "" {
			y.WriteString("    " + line + "\n")
		}
	}
	y.WriteString("    remotes:\n")
	for _, r := range c.Remotes {
		fmt.Fprintf(&y, "      - {name: %s, url: %q", r.Name, r.URL)
		if r.WSURL != "" {
			fmt.Fprintf(&y, ", ws_url: %q", r.WSURL)
		}
		if r.Timeout > 0 {
			fmt.Fprintf(&y, ", timeout: %s", r.Timeout)
		}
		if r.MaxInFlight > 0 {
			fmt.Fprintf(&y, ", max_in_flight: %d", r.MaxInFlight)
		}
		if r.Extra != "" {
			y.WriteString(", " + r.Extra)
		}
		y.WriteString("}\n")
	}
	return y.String()
}

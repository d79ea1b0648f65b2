package remotes

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/fielderr"
)

// HedgeGroup is a set of methods hedged alike.
type HedgeGroup struct {
	// Methods are names; entries ending in "_" or "*" are prefixes.
	Methods []string `yaml:"methods"`
	// Delay is how long the first remote has before the hedge is sent; with
	// a Quantile it is the least wait. 0 sends the hedge at once.
	Delay time.Duration `yaml:"delay"`
	// Quantile, when above 0, waits for this quantile of the first remote's
	// recent latency (0.9: its p90). Until the remote has enough samples
	// Delay is used, and without a Delay the call is not hedged.
	Quantile float64 `yaml:"quantile"`
	// Max is the hedges one call may send; 0 takes 1. Each waits another
	// delay after the previous one.
	Max int `yaml:"max"`
}

// HedgeConfig is a chain's hedging, the chain's hedge section; no groups,
// no hedging.
type HedgeConfig struct {
	// Budget: on average at most this fraction of the hedgeable calls gets
	// a hedge. 0 takes the default.
	Budget float64 `yaml:"budget"`
	// Burst: hedges allowed beyond the average in a burst. 0 takes the
	// default.
	Burst int `yaml:"burst"`
	// Groups in order: a method takes the first group that lists it.
	Groups []HedgeGroup `yaml:"groups"`
}

// Hedging defaults and limits.
const (
	DefaultHedgeBudget = 0.1
	DefaultHedgeBurst  = 10
	// MaxHedges bounds HedgeGroup.Max.
	MaxHedges     = 4
	maxHedgeBurst = 1_000_000
)

// WithDefaults returns c with its zero fields at their defaults; c's
// groups are not changed.
func (c HedgeConfig) WithDefaults() HedgeConfig {
	setDefault(&c.Budget, DefaultHedgeBudget)
	setDefault(&c.Burst, DefaultHedgeBurst)
	c.Groups = slices.Clone(c.Groups)
	for i := range c.Groups {
		setDefault(&c.Groups[i].Max, 1)
	}
	return c
}

// Validate reports every problem of a defaulted c, each naming its field
// (budget, groups[0].max); a chain tries at most maxAttempts remotes per
// call (0: unknown).
func (c HedgeConfig) Validate(maxAttempts int) error {
	var p fielderr.List
	if !(c.Budget > 0 && c.Budget <= 1) {
		p.Add("budget", "must be above 0 and at most 1 (a fraction of the calls)")
	}
	if c.Burst < 1 || c.Burst > maxHedgeBurst {
		p.Add("burst", "must be 1 to %d", maxHedgeBurst)
	}
	for k, g := range c.Groups {
		p.Under(fmt.Sprintf("groups[%d]", k), g.validate(maxAttempts))
	}
	return p.Err()
}

func (g HedgeGroup) validate(maxAttempts int) error {
	var p fielderr.List
	if len(g.Methods) == 0 {
		p.Add("methods", "at least one method is required")
	}
	for m, name := range g.Methods {
		mpath := fmt.Sprintf("methods[%d]", m)
		switch {
		case strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t\r\n"):
			p.Add(mpath, "must be a method name or prefix, not %q", name)
		case !strings.HasSuffix(name, "*") && !strings.HasSuffix(name, "_") && !evm.Lookup(name).Hedgeable():
			p.Add(mpath, "%s is never hedged: writes and filter methods go to one remote (eth_sendRawTransaction already goes to broadcast_fanout remotes)", name)
		}
	}
	if g.Delay < 0 {
		p.Add("delay", "must not be negative")
	}
	if math.IsNaN(g.Quantile) || g.Quantile < 0 || g.Quantile >= 1 {
		p.Add("quantile", "must be 0 (a fixed delay) or between 0 and 1, like 0.9 for the p90")
	}
	switch {
	case g.Max < 1 || g.Max > MaxHedges:
		p.Add("max", "must be 1 to %d", MaxHedges)
	case maxAttempts > 0 && g.Max >= maxAttempts:
		p.Add("max", "must be below max_attempts (%d): each hedge is an attempt", maxAttempts)
	}
	return p.Err()
}

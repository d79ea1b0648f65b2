package app

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes"
)

// HedgeConfig sends a chain's slow reads to a second remote (see
// remotes.HedgeConfig); without groups nothing is hedged.
type HedgeConfig struct {
	// Budget: on average at most this fraction of the hedgeable calls gets
	// a hedge.
	Budget float64 `yaml:"budget"`
	// Burst: hedges allowed beyond the average in a burst.
	Burst  int                `yaml:"burst"`
	Groups []HedgeGroupConfig `yaml:"groups"`
}

// HedgeGroupConfig hedges Methods after Delay, or after the Quantile of the
// first remote's latency (at least Delay); Max hedges per call.
type HedgeGroupConfig struct {
	Methods  []string      `yaml:"methods"`
	Delay    time.Duration `yaml:"delay"`
	Quantile float64       `yaml:"quantile"`
	Max      int           `yaml:"max"`
}

// ScoringConfig weighs a chain's remote scores (see remotes.ScoringConfig).
// The weights and probe_share are pointers because absent (the default)
// differs from 0 (the term, or the probes, off).
type ScoringConfig struct {
	Latency      *float64 `yaml:"latency"`
	Errors       *float64 `yaml:"errors"`
	Throttle     *float64 `yaml:"throttle"`
	Lag          *float64 `yaml:"lag"`
	Misbehaviour *float64 `yaml:"misbehaviour"`
	// Margin: a remote joins its tier's preferred set within this fraction
	// of the best score, and leaves it past twice this.
	Margin               float64       `yaml:"margin"`
	Interval             time.Duration `yaml:"interval"`
	ProbeShare           *float64      `yaml:"probe_share"`
	MisbehaviourHalfLife time.Duration `yaml:"misbehaviour_half_life"`
}

// Bounds of the hedging and scoring settings.
const (
	maxProbeShare     = 0.5
	maxScoreMargin    = 10
	minScoreInterval  = 10 * time.Millisecond
	maxHedgeBurst     = 1_000_000
	maxScoreWeight    = 1000
	hedgeQuantileHelp = "must be 0 (a fixed delay) or between 0 and 1, like 0.9 for the p90"
)

// applyHedgeScoringDefaults fills the chain's hedge and scoring fields;
// called from Config.applyDefaults.
func (c *ChainConfig) applyHedgeScoringDefaults() {
	setDefault(&c.Hedge.Budget, remotes.DefaultHedgeBudget)
	setDefault(&c.Hedge.Burst, remotes.DefaultHedgeBurst)
	for k := range c.Hedge.Groups {
		setDefault(&c.Hedge.Groups[k].Max, 1)
	}
	s := &c.Scoring
	w := remotes.DefaultScoreWeights
	for _, f := range []struct {
		field **float64
		def   float64
	}{
		{&s.Latency, w.Latency}, {&s.Errors, w.Errors}, {&s.Throttle, w.Throttle},
		{&s.Lag, w.Lag}, {&s.Misbehaviour, w.Misbehaviour}, {&s.ProbeShare, remotes.DefaultProbeShare},
	} {
		if *f.field == nil {
			v := f.def
			*f.field = &v
		}
	}
	setDefault(&s.Margin, remotes.DefaultScoreMargin)
	setDefault(&s.Interval, remotes.DefaultScoreInterval)
	setDefault(&s.MisbehaviourHalfLife, remotes.DefaultMisbehaviourHalfLife)
}

// validateHedgeScoring checks an already defaulted chain's hedge and
// scoring sections.
func (c *ChainConfig) validateHedgeScoring(p *problems, path string) {
	h := c.Hedge
	if !(h.Budget > 0 && h.Budget <= 1) {
		p.add(path+".hedge.budget", "must be above 0 and at most 1 (a fraction of the calls)")
	}
	if h.Burst < 1 || h.Burst > maxHedgeBurst {
		p.add(path+".hedge.burst", "must be 1 to %d", maxHedgeBurst)
	}
	for k, g := range h.Groups {
		gpath := fmt.Sprintf("%s.hedge.groups[%d]", path, k)
		if len(g.Methods) == 0 {
			p.add(gpath+".methods", "at least one method is required")
		}
		for m, name := range g.Methods {
			mpath := fmt.Sprintf("%s.methods[%d]", gpath, m)
			switch {
			case strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t\r\n"):
				p.add(mpath, "must be a method name or prefix, not %q", name)
			case !strings.HasSuffix(name, "*") && !strings.HasSuffix(name, "_") && !remotes.Hedgeable(name):
				p.add(mpath, "%s is never hedged: writes and filter methods go to one remote (eth_sendRawTransaction already goes to broadcast_fanout remotes)", name)
			}
		}
		if g.Delay < 0 {
			p.add(gpath+".delay", "must not be negative")
		}
		if math.IsNaN(g.Quantile) || g.Quantile < 0 || g.Quantile >= 1 {
			p.add(gpath+".quantile", hedgeQuantileHelp)
		}
		switch {
		case g.Max < 1 || g.Max > remotes.MaxHedges:
			p.add(gpath+".max", "must be 1 to %d", remotes.MaxHedges)
		case c.MaxAttempts > 0 && g.Max >= c.MaxAttempts:
			p.add(gpath+".max", "must be below max_attempts (%d): each hedge is an attempt", c.MaxAttempts)
		}
	}

	s := c.Scoring
	for _, w := range []struct {
		name string
		v    *float64
	}{
		{"latency", s.Latency}, {"errors", s.Errors}, {"throttle", s.Throttle},
		{"lag", s.Lag}, {"misbehaviour", s.Misbehaviour},
	} {
		if w.v != nil && !(*w.v >= 0 && *w.v <= maxScoreWeight) {
			p.add(path+".scoring."+w.name, "must be 0 (off) to %d", maxScoreWeight)
		}
	}
	if !(s.Margin > 0 && s.Margin <= maxScoreMargin) {
		p.add(path+".scoring.margin", "must be above 0 and at most %d", maxScoreMargin)
	}
	if s.Interval < minScoreInterval {
		p.add(path+".scoring.interval", "must be at least %v", minScoreInterval)
	}
	if s.ProbeShare != nil && !(*s.ProbeShare >= 0 && *s.ProbeShare <= maxProbeShare) {
		p.add(path+".scoring.probe_share", "must be 0 (off) to %v", maxProbeShare)
	}
	if s.MisbehaviourHalfLife <= 0 {
		p.add(path+".scoring.misbehaviour_half_life", "must be positive")
	}
}

// hedgeConfig converts the validated hedge section for remotes.NewPool.
func (c ChainConfig) hedgeConfig() remotes.HedgeConfig {
	out := remotes.HedgeConfig{Budget: c.Hedge.Budget, Burst: c.Hedge.Burst}
	for _, g := range c.Hedge.Groups {
		out.Groups = append(out.Groups, remotes.HedgeGroup{Methods: g.Methods, Delay: g.Delay, Quantile: g.Quantile, Max: g.Max})
	}
	return out
}

// scoringConfig converts the validated scoring section for remotes.NewPool.
func (c ChainConfig) scoringConfig() remotes.ScoringConfig {
	s := c.Scoring
	val := func(v *float64, def float64) float64 {
		if v == nil {
			return def
		}
		return *v
	}
	d := remotes.DefaultScoreWeights
	w := remotes.ScoreWeights{
		Latency:      val(s.Latency, d.Latency),
		Errors:       val(s.Errors, d.Errors),
		Throttle:     val(s.Throttle, d.Throttle),
		Lag:          val(s.Lag, d.Lag),
		Misbehaviour: val(s.Misbehaviour, d.Misbehaviour),
	}
	probe := val(s.ProbeShare, remotes.DefaultProbeShare)
	if probe == 0 {
		probe = -1 // remotes reads 0 as its default
	}
	return remotes.ScoringConfig{Weights: &w, Margin: s.Margin, Interval: s.Interval,
		ProbeShare: probe, MisbehaviourHalfLife: s.MisbehaviourHalfLife}
}

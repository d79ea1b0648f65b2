package score

import (
	"time"

	"github.com/venn-gateway/venn/remotes/fielderr"
)

// Weights weighs the terms of a remote's score (see remotes' score.go). A
// zero weight switches its term off.
type Weights struct {
	Latency      float64 // exponent of the latency (ms)
	Errors       float64 // per unit of fault share
	Throttle     float64 // per unit of rate-limit share
	Lag          float64 // per max_lag blocks behind
	Misbehaviour float64 // per unit of misbehaviour level (1 per misbehaviour, decaying)
}

// DefaultWeights are the weights when none are configured.
var DefaultWeights = Weights{Latency: 1, Errors: 8, Throttle: 4, Lag: 2, Misbehaviour: 16}

// Scoring defaults.
const (
	DefaultMargin               = 0.25
	DefaultInterval             = time.Second
	DefaultProbeShare           = 0.01
	DefaultMisbehaviourHalfLife = 2 * time.Minute
)

// Bounds of the scoring settings.
const (
	maxProbeShare = 0.5
	maxMargin     = 10
	minInterval   = 10 * time.Millisecond
	maxWeight     = 1000
)

// Config is a chain's remote scoring, the chain's scoring section. The
// weights (see Weights) and ProbeShare are pointers because absent, which
// takes the default, differs from 0, which switches the term, or the
// probes, off.
type Config struct {
	Latency      *float64 `yaml:"latency"`
	Errors       *float64 `yaml:"errors"`
	Throttle     *float64 `yaml:"throttle"`
	Lag          *float64 `yaml:"lag"`
	Misbehaviour *float64 `yaml:"misbehaviour"`
	// Margin: a remote joins its tier's preferred set within this fraction
	// of the best score, and leaves it past twice this. 0 takes the default.
	Margin float64 `yaml:"margin"`
	// Interval between scorings. 0 takes the default.
	Interval time.Duration `yaml:"interval"`
	// ProbeShare of a tier's calls goes to its remotes outside the
	// preferred set.
	ProbeShare *float64 `yaml:"probe_share"`
	// MisbehaviourHalfLife: a remote's misbehaviour level halves this often.
	// 0 takes the default.
	MisbehaviourHalfLife time.Duration `yaml:"misbehaviour_half_life"`
}

// WithDefaults returns c with its absent weights and probe share and its
// zero fields at their defaults.
func (c Config) WithDefaults() Config {
	d := DefaultWeights
	for _, f := range []struct {
		field **float64
		def   float64
	}{
		{&c.Latency, d.Latency}, {&c.Errors, d.Errors}, {&c.Throttle, d.Throttle},
		{&c.Lag, d.Lag}, {&c.Misbehaviour, d.Misbehaviour}, {&c.ProbeShare, DefaultProbeShare},
	} {
		if *f.field == nil {
			v := f.def
			*f.field = &v
		}
	}
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MisbehaviourHalfLife == 0 {
		c.MisbehaviourHalfLife = DefaultMisbehaviourHalfLife
	}
	return c
}

// Validate reports every problem of a defaulted c, each naming its field
// (latency, probe_share).
func (c Config) Validate() error {
	var p fielderr.List
	for _, w := range []struct {
		name string
		v    *float64
	}{
		{"latency", c.Latency}, {"errors", c.Errors}, {"throttle", c.Throttle},
		{"lag", c.Lag}, {"misbehaviour", c.Misbehaviour},
	} {
		if w.v != nil && !(*w.v >= 0 && *w.v <= maxWeight) {
			p.Add(w.name, "must be 0 (off) to %d", maxWeight)
		}
	}
	if !(c.Margin > 0 && c.Margin <= maxMargin) {
		p.Add("margin", "must be above 0 and at most %d", maxMargin)
	}
	if c.Interval < minInterval {
		p.Add("interval", "must be at least %v", minInterval)
	}
	if c.ProbeShare != nil && !(*c.ProbeShare >= 0 && *c.ProbeShare <= maxProbeShare) {
		p.Add("probe_share", "must be 0 (off) to %v", maxProbeShare)
	}
	p.Negative("misbehaviour_half_life", c.MisbehaviourHalfLife <= 0)
	return p.Err()
}

// Weights are the score's weights, an absent one at its default.
func (c Config) Weights() Weights {
	d := DefaultWeights
	val := func(v *float64, def float64) float64 {
		if v == nil {
			return def
		}
		return *v
	}
	return Weights{Latency: val(c.Latency, d.Latency), Errors: val(c.Errors, d.Errors),
		Throttle: val(c.Throttle, d.Throttle), Lag: val(c.Lag, d.Lag), Misbehaviour: val(c.Misbehaviour, d.Misbehaviour)}
}

// Probe is the share of a tier's calls its remotes outside the preferred
// set get; absent, the default.
func (c Config) Probe() float64 {
	if c.ProbeShare == nil {
		return DefaultProbeShare
	}
	return *c.ProbeShare
}

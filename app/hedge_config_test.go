package app

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/score"
)

// defaultPoolHedge and defaultPoolScoring are what a chain without hedge
// and scoring sections gives remotes.NewPool.
func defaultPoolHedge() remotes.HedgeConfig {
	return remotes.HedgeConfig{Budget: remotes.DefaultHedgeBudget, Burst: remotes.DefaultHedgeBurst}
}

func defaultPoolScoring() score.Config {
	w := score.DefaultWeights
	return score.Config{Latency: &w.Latency, Errors: &w.Errors, Throttle: &w.Throttle, Lag: &w.Lag,
		Misbehaviour: &w.Misbehaviour, Margin: score.DefaultMargin, Interval: score.DefaultInterval,
		ProbeShare: ptr(score.DefaultProbeShare), MisbehaviourHalfLife: score.DefaultMisbehaviourHalfLife}
}

// defaultPoolCordon is what a chain without a cordon section gives
// remotes.NewPool.
func defaultPoolCordon() remotes.CordonConfig {
	return remotes.CordonConfig{Strikes: remotes.DefaultCordonStrikes, Within: remotes.DefaultCordonWithin,
		Period: remotes.DefaultCordonPeriod}
}

func ptr[T any](v T) *T { return &v }

func TestHedgeScoringConfig(t *testing.T) {
	defaultScoring := defaultPoolScoring()
	tests := []struct {
		name        string
		give        string
		wantHedge   remotes.HedgeConfig
		wantScoring score.Config
	}{
		{name: "defaults: no hedging, default scoring", give: threeRemotes,
			wantHedge: defaultPoolHedge(), wantScoring: defaultScoring},
		{name: "everything set", give: threeRemotes + `    hedge:
      budget: 0.05
      burst: 20
      groups:
        - {methods: [eth_call, eth_getBalance, "eth_get*"], quantile: 0.9, delay: 5ms}
        - {methods: [trace_], delay: 250ms, max: 2}
    scoring: {latency: 2, errors: 0, throttle: 1, lag: 3, misbehaviour: 50, margin: 0.5, interval: 500ms, probe_share: 0, misbehaviour_half_life: 10m}
`,
			wantHedge: remotes.HedgeConfig{Budget: 0.05, Burst: 20, Groups: []remotes.HedgeGroup{
				{Methods: []string{"eth_call", "eth_getBalance", "eth_get*"}, Quantile: 0.9, Delay: 5 * time.Millisecond, Max: 1},
				{Methods: []string{"trace_"}, Delay: 250 * time.Millisecond, Max: 2},
			}},
			wantScoring: score.Config{Latency: ptr(2.0), Errors: ptr(0.0), Throttle: ptr(1.0), Lag: ptr(3.0), Misbehaviour: ptr(50.0),
				Margin: 0.5, Interval: 500 * time.Millisecond, ProbeShare: ptr(0.0), MisbehaviourHalfLife: 10 * time.Minute}},
		{name: "one weight set, the others default", give: threeRemotes + `    scoring: {errors: 20}
`,
			wantHedge: defaultPoolHedge(),
			wantScoring: func() score.Config {
				s := defaultScoring
				s.Errors = ptr(20.0)
				return s
			}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := mustParse(t, tt.give).Chains[0].PoolConfig()
			if !reflect.DeepEqual(pc.Hedge, tt.wantHedge) {
				t.Errorf("hedge = %+v\nwant %+v", pc.Hedge, tt.wantHedge)
			}
			if !reflect.DeepEqual(pc.Scoring, tt.wantScoring) {
				t.Errorf("scoring = %s\nwant %s", scoringString(pc.Scoring), scoringString(tt.wantScoring))
			}
		})
	}
}

func TestHedgeScoringConfigNamesField(t *testing.T) {
	const p = "chains[0]."
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "hedge", give: `    hedge:
      budget: 1.5
      burst: -1
      groups:
        - {methods: [], delay: -1s, quantile: 1, max: 9}
        - {methods: [eth_sendRawTransaction, eth_newFilter, "eth call", "eth_*"], max: 4}
`, want: []string{
			p + "hedge.budget: must be above 0 and at most 1 (a fraction of the calls)",
			p + "hedge.burst: must be 1 to 1000000",
			p + "hedge.groups[0].methods: at least one method is required",
			p + "hedge.groups[0].delay: must not be negative",
			p + "hedge.groups[0].quantile: must be 0 (a fixed delay) or between 0 and 1, like 0.9 for the p90",
			p + "hedge.groups[0].max: must be 1 to 4",
			p + "hedge.groups[1].methods[0]: eth_sendRawTransaction is never hedged",
			p + "hedge.groups[1].methods[1]: eth_newFilter is never hedged",
			p + `hedge.groups[1].methods[2]: must be a method name or prefix, not "eth call"`,
			p + "hedge.groups[1].max: must be below max_attempts (4): each hedge is an attempt",
		}},
		{name: "scoring", give: `    scoring: {latency: -1, errors: 2000, margin: -0.1, interval: 1ms, probe_share: 0.9, misbehaviour_half_life: -1m}
`, want: []string{
			p + "scoring.latency: must be 0 (off) to 1000",
			p + "scoring.errors: must be 0 (off) to 1000",
			p + "scoring.margin: must be above 0 and at most 10",
			p + "scoring.interval: must be at least 10ms",
			p + "scoring.probe_share: must be 0 (off) to 0.5",
			p + "scoring.misbehaviour_half_life: must be positive",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(threeRemotes + tt.give))
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in\n%v", w, err)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}

// scoringString shows a scoring section's values, not its pointers.
func scoringString(s score.Config) string {
	v := func(p *float64) string {
		if p == nil {
			return "absent"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{latency %s errors %s throttle %s lag %s misbehaviour %s margin %v interval %v probe_share %s half_life %v}",
		v(s.Latency), v(s.Errors), v(s.Throttle), v(s.Lag), v(s.Misbehaviour), s.Margin, s.Interval, v(s.ProbeShare), s.MisbehaviourHalfLife)
}

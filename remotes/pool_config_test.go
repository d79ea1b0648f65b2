package remotes

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/remotes/score"
)

// The chain's settings decode from their YAML keys; the chain's name, id
// and reply budget are not in the schema.
func TestPoolConfigDecodes(t *testing.T) {
	src := `
block_time: 2s
call_deadline: 5s
breaker: {failures: 3, cooldown: 1s}
cordon: {strikes: 2}
hedge: {budget: 0.5, groups: [{methods: [eth_call], delay: 5ms}]}
scoring: {errors: 0, probe_share: 0}
`
	var c PoolConfig
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	c = c.WithDefaults(2)
	if c.BlockTime != 2*time.Second || c.CallDeadline != 5*time.Second || c.Breaker != (BreakerConfig{3, time.Second}) {
		t.Errorf("pool = %+v", c)
	}
	if c.Cordon != (CordonConfig{Strikes: 2, Within: DefaultCordonWithin, Period: DefaultCordonPeriod}) {
		t.Errorf("cordon = %+v", c.Cordon)
	}
	if c.Hedge.Burst != DefaultHedgeBurst || c.Hedge.Groups[0].Max != 1 {
		t.Errorf("hedge = %+v", c.Hedge)
	}
	// A weight given as 0 is off; one not given takes its default.
	if w := c.Scoring.Weights(); w.Errors != 0 || w.Latency != score.DefaultWeights.Latency {
		t.Errorf("weights = %+v", w)
	}
	if got := c.Scoring.Probe(); got != 0 {
		t.Errorf("probe share = %v, want 0 (off)", got)
	}
	for _, key := range []string{"name: x", "chain_id: 1", "replies: 1", "chain: x"} {
		var c PoolConfig
		dec := yaml.NewDecoder(strings.NewReader(key))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err == nil {
			t.Errorf("%q decoded into the pool's schema", key)
		}
	}
}

// WithDefaults is the only default: applying it twice changes nothing,
// and it does not write into the caller's hedge groups.
func TestPoolConfigDefaultsOnce(t *testing.T) {
	groups := []HedgeGroup{{Methods: []string{"eth_call"}}}
	c := PoolConfig{Hedge: HedgeConfig{Groups: groups}, Consensus: []ConsensusRule{{Methods: []string{"eth_call"}}}}
	once := c.WithDefaults(3)
	if twice := once.WithDefaults(3); !reflect.DeepEqual(once, twice) {
		t.Errorf("defaults applied twice differ:\n%+v\n%+v", once, twice)
	}
	if groups[0].Max != 0 {
		t.Errorf("WithDefaults wrote into the caller's groups: %+v", groups)
	}
	if r := once.Consensus[0]; r.Remotes != 3 || r.Agree != 2 {
		t.Errorf("consensus = %+v", r)
	}
	if once.MaxLag != DefaultMaxLag || once.PendingPollInterval != DefaultPendingPollInterval || once.BlockTime != 0 {
		t.Errorf("pool = %+v", once)
	}
	if err := once.Validate(testConfigs([]string{"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"}, nil)); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

// Validate names each field as the chain's section spells it, remotes
// included, and reports every problem at once.
func TestPoolConfigValidateNamesField(t *testing.T) {
	c := PoolConfig{
		CallDeadline: 4 * time.Second, MaxAttempts: 2, ChainRecheck: 10 * time.Millisecond,
		Cordon:  CordonConfig{Strikes: -1},
		Hedge:   HedgeConfig{Groups: []HedgeGroup{{Methods: []string{"eth_sendRawTransaction"}, Max: 2}}},
		Scoring: score.Config{Lag: ptr(-1.0)},
	}.WithDefaults(1)
	rs := []Config{
		{Name: "a", URL: "http://127.0.0.1:1", Timeout: 4 * time.Second},
		{Name: "a", URL: "ftp://127.0.0.1:2"},
	}
	err := c.Validate(rs)
	want := []string{
		"chain_recheck: must be at least 100ms",
		"cordon.strikes: must be positive",
		"hedge.groups[0].methods[0]: eth_sendRawTransaction is never hedged",
		"hedge.groups[0].max: must be below max_attempts (2)",
		"scoring.lag: must be 0 (off) to 1000",
		"remotes[0].timeout: must be shorter than the chain's call_deadline (4s)",
		`remotes[1].name: "a" is already used by remotes[0]`,
		"remotes[1].url: must be http(s):// or ws(s)://",
	}
	if err == nil {
		t.Fatal("Validate passed")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in\n%v", w, err)
		}
	}
	if n := len(strings.Split(err.Error(), "\n")); n != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", n, len(want), err)
	}
}

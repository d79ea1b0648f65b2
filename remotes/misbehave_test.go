package remotes

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// idlePool is a pool that is never started, over n remotes that count as
// verified and healthy, with its clock in the test's hands.
func idlePool(t *testing.T, n int, cfg PoolConfig) (*Pool, *time.Time) {
	t.Helper()
	rs := make([]Config, n)
	for i := range rs {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: "http://127.0.0.1:1"}
	}
	cfg.Chain = "test"
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.members() {
		r.cc.Set(health.OK)
	}
	now := time.Unix(1_700_000_000, 0)
	p.now = func() time.Time { return now }
	return p, &now
}

func TestCordon(t *testing.T) {
	type event struct {
		at   time.Duration
		kind string
	}
	tests := []struct {
		name   string
		give   []event
		want   bool          // n0 cordoned after the events
		after  time.Duration // then checked again this long after the last
		wantAt bool
	}{
		{name: "three within a minute", give: []event{{0, misbehave.Disagree}, {10 * time.Second, misbehave.Disagree}, {20 * time.Second, misbehave.Integrity}},
			want: true, after: 4 * time.Minute, wantAt: true},
		{name: "back after the period", give: []event{{0, misbehave.Disagree}, {time.Second, misbehave.Disagree}, {2 * time.Second, misbehave.Disagree}},
			want: true, after: 5 * time.Minute, wantAt: false},
		{name: "spread wider than the window", give: []event{{0, misbehave.Disagree}, {40 * time.Second, misbehave.Disagree}, {80 * time.Second, misbehave.Disagree}},
			want: false},
		{name: "two", give: []event{{0, misbehave.Integrity}, {time.Second, misbehave.Integrity}}, want: false},
		{name: "disagreements at the head are no strikes", give: []event{{0, misbehave.DisagreeTip}, {time.Second, misbehave.DisagreeTip}, {2 * time.Second, misbehave.DisagreeTip}},
			want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, now := idlePool(t, 3, PoolConfig{})
			start := *now
			for _, e := range tt.give {
				*now = start.Add(e.at)
				p.misbehaved(p.members()[0], e.kind, "eth_getBlockByNumber", "test")
			}
			r := p.members()[0]
			if got := r.cordoned(*now); got != tt.want {
				t.Fatalf("cordoned %v, want %v", got, tt.want)
			}
			if got := r.available(*now)&outCordoned != 0; got != tt.want {
				t.Fatalf("out cordoned %v while cordoned %v", got, tt.want)
			}
			if got := testutil.ToFloat64(r.mb.cordonedGauge); got != map[bool]float64{true: 1}[tt.want] {
				t.Fatalf("cordoned gauge %v", got)
			}
			if tt.after == 0 {
				return
			}
			*now = now.Add(tt.after)
			p.endCordons(*now)
			if got := r.cordoned(*now); got != tt.wantAt {
				t.Fatalf("%v later: cordoned %v, want %v", tt.after, got, tt.wantAt)
			}
			if !tt.wantAt && testutil.ToFloat64(r.mb.cordonedGauge) != 0 {
				t.Fatal("cordoned gauge still 1 after the period")
			}
		})
	}
}

// A cordon never takes the last remote in rotation.
func TestCordonSparesTheLastRemote(t *testing.T) {
	p, now := idlePool(t, 3, PoolConfig{Cordon: CordonConfig{Strikes: 1}})
	p.misbehaved(p.members()[0], misbehave.Integrity, "eth_getBlockByNumber", "bad root")
	p.misbehaved(p.members()[1], misbehave.Integrity, "eth_getBlockByNumber", "bad root")
	p.misbehaved(p.members()[2], misbehave.Integrity, "eth_getBlockByNumber", "bad root")
	got := []bool{p.members()[0].cordoned(*now), p.members()[1].cordoned(*now), p.members()[2].cordoned(*now)}
	if fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("cordoned %v, want the last one spared", got)
	}
	if r, _ := p.pick("eth_getBlockByNumber", route{}, 0); r != p.members()[2] {
		t.Fatalf("picked %v, want the one remote not cordoned", r)
	}
	if got := misbehaviours(p, "n2", misbehave.Integrity); got != 1 {
		t.Fatalf("spared remote's misbehaviour counted %v times, want 1", got)
	}
}

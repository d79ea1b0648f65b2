package remotes

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/status"
	"github.com/venn-gateway/venn/remotes/wire"
)

func TestSetCordons(t *testing.T) {
	tests := []struct {
		name     string
		healthy  []bool   // of n0, n1, n2
		give     []string // cordoned, oldest first
		wantOut  []string // out of rotation by hand
		wantHeld []string
	}{
		{name: "one of three", healthy: []bool{true, true, true}, give: []string{"n0"}, wantOut: []string{"n0"}},
		{name: "two of three", healthy: []bool{true, true, true}, give: []string{"n0", "n1"}, wantOut: []string{"n0", "n1"}},
		{name: "all three: the newest is held", healthy: []bool{true, true, true}, give: []string{"n0", "n1", "n2"},
			wantOut: []string{"n0", "n1"}, wantHeld: []string{"n2"}},
		{name: "the last healthy one is held", healthy: []bool{true, false, false}, give: []string{"n0"}, wantHeld: []string{"n0"}},
		{name: "an unhealthy one goes", healthy: []bool{true, false, true}, give: []string{"n1"}, wantOut: []string{"n1"}},
		{name: "unknown names are ignored", healthy: []bool{true, true, true}, give: []string{"other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, now := idlePool(t, 3, PoolConfig{})
			for i, ok := range tt.healthy {
				if !ok {
					p.members()[i].cc.Set(health.Wrong)
				}
			}
			var cs []ManualCordon
			for i, name := range tt.give {
				cs = append(cs, ManualCordon{Remote: name, By: "ops", At: now.Add(time.Duration(i) * time.Second)})
			}
			// Applied twice: what was applied last time must not flip.
			p.SetCordons(*now, cs)
			held := p.SetCordons(*now, cs)
			var out []string
			for _, r := range p.members() {
				if r.manuallyOut() {
					out = append(out, r.Name())
				}
			}
			if !slices.Equal(out, tt.wantOut) || !slices.Equal(held, tt.wantHeld) {
				t.Errorf("out %v held %v, want %v and %v", out, held, tt.wantOut, tt.wantHeld)
			}
		})
	}
}

func TestCordonStatusAndGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, now := idlePool(t, 2, PoolConfig{})
	m := NewMetrics(reg)
	p.initConsensus(m)
	for _, r := range p.members() {
		r.initMisbehaviour(m)
		r.now = p.now
		r.head.Store(100)
	}
	until := now.Add(time.Minute)
	p.SetCordons(*now, []ManualCordon{{Remote: "n1", Reason: "flaky", By: "alice", At: *now, Until: until}})
	gauge := func(name string) float64 { return testutil.ToFloat64(m.mb.Cordoned("test", name)) }
	if gauge("n1") != 1 || gauge("n0") != 0 {
		t.Fatalf("venn_remote_cordoned n0=%v n1=%v, want 0 and 1", gauge("n0"), gauge("n1"))
	}
	st := p.Status()
	if !st[0].InRotation || st[1].InRotation || len(st[1].Out) != 1 || st[1].Out[0].Code != status.OutCordoned ||
		!st[1].Out[0].Until.Equal(until) || !strings.Contains(st[1].Out[0].Text, "alice") {
		t.Fatalf("status %+v", st)
	}
	// The caller drops an expired cordon: the remote is back.
	*now = until
	p.SetCordons(*now, []ManualCordon{{Remote: "n1", By: "alice", At: until.Add(-time.Minute), Until: until}})
	if gauge("n1") != 0 || !p.Status()[1].InRotation {
		t.Fatalf("after expiry: gauge %v, status %+v", gauge("n1"), p.Status()[1])
	}
}

func TestStatusReasonsAndRedactedError(t *testing.T) {
	p, _ := idlePool(t, 2, PoolConfig{MaxLag: 2})
	r := p.members()[1]
	p.members()[0].head.Store(100)
	r.head.Store(90)
	r.red = (&wire.Options{Name: "n1", URL: "https://provider.example", Headers: http.Header{"X-Api-Key": {"sekrit-key"}}}).Redactor()
	r.noteError(errors.New("remote n1: 401 invalid key sekrit-key from 10.1.2.3:8545 and [::1]:80"))
	st := p.Status()[1]
	if st.InRotation || st.Out[0].Code != status.OutLagging || st.Lag != 10 || !strings.Contains(st.Out[0].Text, "10 blocks") {
		t.Fatalf("status %+v", st)
	}
	if strings.Contains(st.LastError, "sekrit") || !strings.Contains(st.LastError, "[redacted]") ||
		strings.Contains(st.LastError, "10.1") || strings.Contains(st.LastError, "::1") {
		t.Fatalf("last error %q", st.LastError)
	}
}

// TestCordonNeverTakesTheLastRemoteAtCallTime: a manual cordon applied
// while another remote was in rotation stops keeping its remote out when
// that other one breaks; calls go to the cordoned remote rather than fail.
func TestCordonNeverTakesTheLastRemoteAtCallTime(t *testing.T) {
	p, now := idlePool(t, 2, PoolConfig{})
	for _, r := range p.members() {
		r.head.Store(100)
	}
	if held := p.SetCordons(*now, []ManualCordon{{Remote: "n0", By: "ops", At: *now}}); len(held) != 0 {
		t.Fatalf("held %v", held)
	}
	if r, _ := p.pick("eth_blockNumber", route{}, 0); r == nil || r.Name() != "n1" {
		t.Fatalf("picked %v, want n1 while n0 is cordoned", r)
	}
	p.members()[1].cc.Set(health.Wrong)
	if r, _ := p.pick("eth_blockNumber", route{}, 0); r == nil || r.Name() != "n0" {
		t.Fatalf("picked %v with n1 broken, want the cordoned n0", r)
	}
	if !p.Ready() {
		t.Error("not ready though n0 serves")
	}
}

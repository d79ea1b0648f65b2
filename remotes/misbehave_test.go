package remotes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
		r.chainState.Store(chainOK)
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
		{name: "three within a minute", give: []event{{0, kindDisagree}, {10 * time.Second, kindDisagree}, {20 * time.Second, kindIntegrity}},
			want: true, after: 4 * time.Minute, wantAt: true},
		{name: "back after the period", give: []event{{0, kindDisagree}, {time.Second, kindDisagree}, {2 * time.Second, kindDisagree}},
			want: true, after: 5 * time.Minute, wantAt: false},
		{name: "spread wider than the window", give: []event{{0, kindDisagree}, {40 * time.Second, kindDisagree}, {80 * time.Second, kindDisagree}},
			want: false},
		{name: "two", give: []event{{0, kindIntegrity}, {time.Second, kindIntegrity}}, want: false},
		{name: "disagreements at the head are no strikes", give: []event{{0, kindDisagreeTip}, {time.Second, kindDisagreeTip}, {2 * time.Second, kindDisagreeTip}},
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
	p.misbehaved(p.members()[0], kindIntegrity, "eth_getBlockByNumber", "bad root")
	p.misbehaved(p.members()[1], kindIntegrity, "eth_getBlockByNumber", "bad root")
	p.misbehaved(p.members()[2], kindIntegrity, "eth_getBlockByNumber", "bad root")
	got := []bool{p.members()[0].cordoned(*now), p.members()[1].cordoned(*now), p.members()[2].cordoned(*now)}
	if fmt.Sprint(got) != "[true true false]" {
		t.Fatalf("cordoned %v, want the last one spared", got)
	}
	if r, _ := p.pick("eth_getBlockByNumber", route{}, 0); r != p.members()[2] {
		t.Fatalf("picked %v, want the one remote not cordoned", r)
	}
	if got := misbehaviours(p, "n2", kindIntegrity); got != 1 {
		t.Fatalf("spared remote's misbehaviour counted %v times, want 1", got)
	}
}

// blockingWriter blocks its first Write until released.
type blockingWriter struct {
	entered, release chan struct{}
	once             sync.Once

	mu     sync.Mutex
	lines  []string
	closed bool
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() {
		close(w.entered)
		<-w.release
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(b))
	return len(b), nil
}

func (w *blockingWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

// A writer that falls behind costs lines, never a blocked call; stop writes
// what was queued and closes the file.
func TestMisbehaviourLogDropsWhenFull(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	m := newMisbehaviourMetrics(nil)
	l := &misbehaviourLog{path: "x", open: func(string) (io.WriteCloser, error) { return w, nil },
		log: slog.New(slog.DiscardHandler), dropped: m.logDropped.WithLabelValues("test"), queue: 2}
	l.write([]byte("before start\n"))
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	l.write([]byte("1\n"))
	<-w.entered // the writer holds line 1
	for i := 2; i <= 5; i++ {
		l.write(fmt.Appendf(nil, "%d\n", i)) // 2 and 3 fit the queue
	}
	if got := testutil.ToFloat64(l.dropped); got != 3 {
		t.Fatalf("dropped %v, want 3 (one before start, two over the queue)", got)
	}
	close(w.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(w.lines) != "[1\n 2\n 3\n]" || !w.closed {
		t.Fatalf("wrote %q (closed %v), want lines 1-3 and the file closed", w.lines, w.closed)
	}
	l.write([]byte("after stop\n"))
	if got := testutil.ToFloat64(l.dropped); got != 4 {
		t.Fatalf("a line after stop: dropped %v, want 4", got)
	}
}

package heads

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

type member struct {
	j     Judgement
	claim *Report
	head  uint64
}

func (m *member) Judgement() *Judgement      { return &m.j }
func (m *member) Claim() *Report             { return m.claim }
func (m *member) Verified() bool             { return true }
func (m *member) OffChain() bool             { return false }
func (m *member) Healthy(now time.Time) bool { return true }
func (m *member) Vouch(n uint64)             { m.head = n }
func (m *member) Logger() *slog.Logger       { return discard }

type gauge struct{ v float64 }

func (g *gauge) Set(v float64) { g.v = v }

func TestTrackerHoldsAnUncorroboratedJump(t *testing.T) {
	var tr Tracker
	var g gauge
	tr.Init(discard, func() time.Duration { return 0 }, 12*time.Second, &g)
	now := time.Unix(1000, 0)
	a := &member{claim: &Report{Number: 100, Hash: "0xa", Time: 990}}
	b := &member{claim: &Report{Number: 100, Hash: "0xa", Time: 990}}
	ms := []Member{a, b}
	changed := tr.HeadChanged()
	if held := tr.Round(ms, now, 2); len(held) != 0 || tr.Head() != 100 || a.head != 100 {
		t.Fatalf("held %v, head %d: want 100 followed", held, tr.Head())
	}
	select {
	case <-changed:
	default:
		t.Fatal("HeadChanged not closed when the tip moved")
	}
	// a claims a head far beyond what a second allows: held, b contradicts.
	a.claim = &Report{Number: 100_000, Hash: "0xf", Parent: "0xe", Time: 991}
	held := tr.Round(ms, now, 2)
	if len(held) != 1 || held[0].By != a || !held[0].Evidence || tr.Head() != 100 || a.j.Held != a.claim {
		t.Fatalf("held %+v, head %d: want a's jump held on b's evidence", held, tr.Head())
	}
	// Its child of the tip is followed at once.
	b.claim = &Report{Number: 101, Hash: "0xb", Parent: "0xa", Time: 1002}
	tr.Round(ms, now, 2)
	if n, h := tr.Head(), tr.Tip().Hash; n != 101 || h != "0xb" {
		t.Fatalf("tip %d %s, want 101 0xb", n, h)
	}
	if h, ok := tr.HashAt(100); !ok || h != "0xa" {
		t.Fatalf("HashAt(100) = %q %v, want the tip's parent", h, ok)
	}
}

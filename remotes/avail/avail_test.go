package avail

import (
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// TestProbeWantedBeforeTheHead: a call for old data that comes before the
// chain has a head starts the probes once a head shows it old (it did not:
// the probes waited for a second call, and /readyz showed no window).
func TestProbeWantedBeforeTheHead(t *testing.T) {
	w := NewWanted()
	w.Note(300, 0)
	w.Note(100, 0)
	w.Note(200, 0)
	for _, head := range []uint64{0, 150, 228} {
		if w.Due(head) {
			t.Fatalf("probes wanted at head %d for block 100, within a state window", head)
		}
	}
	if !w.Due(229) {
		t.Fatal("block 100 asked before the first head: probes not wanted at head 229")
	}
	select {
	case <-w.C():
	default:
		t.Fatal("probes wanted, but their channel is still open")
	}
	w.Note(1, 5000) // once only: closing twice would panic
}

// TestMarkLive: what an answer taught holds for AnswerTTL, then the
// probe's mark it raised holds again (or nothing, when none).
func TestMarkLive(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	probe := &mark{oldest: 900, atHead: 1000, probed: true, at: t0}
	answer := &mark{oldest: 950, atHead: 1000, at: t0, base: probe}
	alone := &mark{oldest: 950, atHead: 1000, at: t0}
	tests := []struct {
		name string
		give *mark
		at   time.Time
		want *mark
	}{
		{"fresh answer", answer, t0.Add(AnswerTTL / 2), answer},
		{"stale answer: the probe's again", answer, t0.Add(AnswerTTL + time.Second), probe},
		{"stale answer without a probe: nothing", alone, t0.Add(AnswerTTL + time.Second), nil},
		{"a probe does not go stale", probe, t0.Add(100 * AnswerTTL), probe},
	}
	for _, tt := range tests {
		if got := tt.give.live(tt.at); got != tt.want {
			t.Errorf("%s: live = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// A windowed kind's window moves up with the head; a fixed one does not.
	if got := probe.drifted(evm.DataState, 1100); got != 1000 {
		t.Errorf("state oldest at head 1100 = %d, want 1000", got)
	}
	if got := probe.drifted(evm.DataLogs, 1100); got != 900 {
		t.Errorf("logs oldest at head 1100 = %d, want 900", got)
	}
}

// TestSearch: the probe's search finds a pruned window's edge within its
// call bound, answers an archive in one call, and gives up on a remote
// that serves not even recent blocks.
func TestSearch(t *testing.T) {
	const head = 100_000
	tests := []struct {
		name       string
		give       func(n uint64) (served, settled bool)
		wantOK     bool
		wantOldest uint64
		wantLacks  uint64
		maxCalls   int
	}{
		{name: "archive", give: func(uint64) (bool, bool) { return true, true }, wantOK: true, maxCalls: 1},
		{name: "window of 5000", give: func(n uint64) (bool, bool) { return n >= head-5000, true },
			wantOK: true, wantOldest: head - 5000, wantLacks: head - 5000, maxCalls: maxCalls},
		{name: "unsettled", give: func(uint64) (bool, bool) { return false, false }, maxCalls: 1},
		{name: "broken", give: func(uint64) (bool, bool) { return false, true }, maxCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			oldest, lacks, ok := Search(head, func(n uint64) (bool, bool) {
				calls++
				return tt.give(n)
			})
			if ok != tt.wantOK || calls > tt.maxCalls {
				t.Fatalf("ok %v after %d calls, want %v within %d", ok, calls, tt.wantOK, tt.maxCalls)
			}
			if !ok {
				return
			}
			// The search may stop short: the edge lies in [lacks, oldest].
			if oldest < tt.wantOldest || lacks > tt.wantLacks || lacks > oldest {
				t.Errorf("oldest %d, lacks %d; want the edge %d within [lacks, oldest]", oldest, lacks, tt.wantOldest)
			}
		})
	}
}

// TestWindowsLacks: an answer only ever raises a window, once per lesson,
// and a probe may lower it again.
func TestWindowsLacks(t *testing.T) {
	var w Windows
	t0 := time.Unix(1700000000, 0)
	if o, raised := w.Lacks(evm.DataLogs, 500, 0, 1000, t0); !raised || o != 501 {
		t.Fatalf("first lesson: oldest %d raised %v, want 501 true", o, raised)
	}
	if _, raised := w.Lacks(evm.DataLogs, 400, 0, 1000, t0); raised {
		t.Error("a lesson below what is known raised the window")
	}
	if got := w.Probed(evm.DataLogs, 100, 50, 1000, t0, 1000); got != 100 || w.LacksBelow(evm.DataLogs, 1000, t0) != 50 {
		t.Errorf("probe: oldest %d lacks below %d, want 100 and 50", got, w.LacksBelow(evm.DataLogs, 1000, t0))
	}
	if src, _ := w.Source(evm.DataLogs, t0); src != "probe" {
		t.Errorf("source %q, want probe", src)
	}
}

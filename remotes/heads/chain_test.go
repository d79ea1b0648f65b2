package heads

import (
	"testing"
	"time"
)

// The run of canonical hashes follows the tip: a tip on top of it extends
// it, a sibling or a shorter branch cuts what no longer links, and a tip
// far above it starts again from the tip and its parent.
func TestTipChain(t *testing.T) {
	tip := func(n uint64, hash, parent string) *Report {
		return &Report{Number: n, Hash: hash, Parent: parent}
	}
	var c *Chain
	c = c.Extend(tip(10, "a10", "a9"))
	c = c.Extend(tip(11, "a11", "a10"))
	c = c.Extend(tip(12, "a12", "a11"))
	tests := []struct {
		name  string
		chain *Chain
		give  uint64
		want  string // "": not held
	}{
		{"tip", c, 12, "a12"},
		{"linked below", c, 10, "a10"},
		{"the first tip's parent", c, 9, "a9"},
		{"below what is known", c, 8, ""},
		{"above the tip", c, 13, ""},
		{"a sibling replaces the tip", c.Extend(tip(12, "b12", "a11")), 12, "b12"},
		{"a sibling keeps what it links to", c.Extend(tip(12, "b12", "a11")), 10, "a10"},
		{"a shorter branch cuts the rest", c.Extend(tip(11, "b11", "b10")), 10, "b10"},
		{"a shorter branch drops the old tip", c.Extend(tip(11, "b11", "b10")), 12, ""},
		{"a shorter branch knows nothing below its parent", c.Extend(tip(11, "b11", "b10")), 9, ""},
		{"a jump starts again", c.Extend(tip(40, "a40", "a39")), 39, "a39"},
		{"a jump forgets the old run", c.Extend(tip(40, "a40", "a39")), 12, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.chain.At(tt.give)
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("At(%d) = %q, %v; want %q", tt.give, got, ok, tt.want)
			}
		})
	}
	long := c
	for n := uint64(13); n < 13+2*chainLen; n++ {
		long = long.Extend(tip(n, "h"+string(rune('0'+n%10)), long.hashes[0]))
	}
	if len(long.hashes) != chainLen {
		t.Fatalf("%d hashes kept, want at most %d", len(long.hashes), chainLen)
	}
}

// The pool's heads may be old news while a stall is being confirmed, and
// while the stall watch's beat is overdue (it has not run since the stall).
func TestStallWatch(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		beat       time.Time // zero: the watch never ran
		confirming bool
		want       bool
	}{
		{"never ran", time.Time{}, false, false},
		{"beating", now.Add(-stallTick), false, false},
		{"beat overdue", now.Add(-2 * stallGap), false, true},
		{"confirming", now, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Stalls
			if !tt.beat.IsZero() {
				s.beat.Store(tt.beat.UnixNano())
			}
			s.confirming.Store(tt.confirming)
			if got := s.Stalled(now); got != tt.want {
				t.Fatalf("Stalled = %v, want %v", got, tt.want)
			}
		})
	}
}

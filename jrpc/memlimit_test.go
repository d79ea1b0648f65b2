package jrpc

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestReplyBudgetFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name       string
		give, want int64
	}{
		{"unknown limit", 0, 1 << 30},
		{"a 128 MiB container", 128 * mib, 32 * mib},
		{"a 2 GiB container", 2048 * mib, 512 * mib},
		{"a 24 GiB host: capped", 24 << 30, 1 << 30},
		{"a tiny limit: floored", 8 * mib, 4 * mib},
	}
	for _, tt := range tests {
		if got := replyBudgetFor(tt.give); got != tt.want {
			t.Errorf("%s: replyBudgetFor(%d) = %d, want %d", tt.name, tt.give, got, tt.want)
		}
	}
}

// GOMEMLIMIT (or debug.SetMemoryLimit) is the limit when set; without
// it the cgroup's or the host's memory is, never nothing on Linux.
func TestMemoryLimitReadsGOMEMLIMIT(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	debug.SetMemoryLimit(128 << 20)
	if got := readMemoryLimit(); got.bytes != 128<<20 || got.source != "gomemlimit" {
		t.Errorf("with GOMEMLIMIT 128 MiB: %+v", got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got := readMemoryLimit(); got.bytes <= 0 || got.source == "gomemlimit" {
		t.Errorf("without GOMEMLIMIT: %+v, want the cgroup's or the host's", got)
	}
}

package retry

import (
	"context"
	"testing"
	"time"
)

// A loop whose context ends is not held by its wait; one whose context
// lives waits its delay out.
func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context reported it alive")
	}
	start := time.Now()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep on a live context reported it ended")
	}
	if took := time.Since(start); took < time.Millisecond {
		t.Fatalf("Sleep returned after %v, before its delay", took)
	}
}

func TestDouble(t *testing.T) {
	tests := []struct {
		give, lo, hi, want time.Duration
	}{
		{give: 0, lo: 100 * time.Millisecond, hi: time.Second, want: 100 * time.Millisecond},
		{give: 100 * time.Millisecond, lo: 100 * time.Millisecond, hi: time.Second, want: 200 * time.Millisecond},
		{give: 800 * time.Millisecond, lo: 100 * time.Millisecond, hi: time.Second, want: time.Second},
		{give: 30 * time.Second, lo: 0, hi: 5 * time.Minute, want: time.Minute},
	}
	for _, tt := range tests {
		if got := Double(tt.give, tt.lo, tt.hi); got != tt.want {
			t.Errorf("Double(%v, %v, %v) = %v, want %v", tt.give, tt.lo, tt.hi, got, tt.want)
		}
	}
}

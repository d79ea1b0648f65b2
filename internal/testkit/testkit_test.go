package testkit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(10*time.Second, func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition that comes true was not seen")
	}
	if Poll(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	calls := 0
	if !Poll(0, func() bool { calls++; return true }) || calls != 1 {
		t.Fatalf("a condition that holds at once: %d calls", calls)
	}
}

func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "line %d\n", i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.Count("line "); got != 800 {
		t.Fatalf("%d lines, want 800", got)
	}
}

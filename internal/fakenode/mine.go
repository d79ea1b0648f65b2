package fakenode

import (
	"sync"
	"testing"
	"time"
)

// MineEvery mines one block on every node each d, as a chain of that block
// time that all of them follow, until stop is called or tb ends. stop
// returns once the miner has; calling it again does nothing.
func MineEvery(tb testing.TB, d time.Duration, nodes ...*Node) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				for _, n := range nodes {
					n.Mine(1)
				}
			}
		}
	})
	stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	tb.Cleanup(stop)
	return stop
}

package subcenter

import "sync"

// crew owns the goroutines a Center starts while it serves: the
// connections' writers, the forgetting of closed connections, and the
// relays. stop refuses new ones and waits for every one started, so
// nothing the Center started outlives it.
type crew struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// Go runs f in a goroutine the crew owns; false, and f never runs, once
// the crew stopped.
func (w *crew) Go(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.wg.Go(f)
	return true
}

// stop refuses new goroutines and waits for the running ones.
func (w *crew) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.wg.Wait()
}

package app

import "sync"

// A chain a reload removes takes its series with it, or dashboards and
// alerts keep seeing its last values (a head that stopped, a leader gauge
// at 1). Series are shared by name, though: a chain whose chain id
// changed is removed and added again in one reload, and the one added
// writes the same series while the one removed drains. So each chain
// built counts itself in before its parts resolve their series (hold), and
// the series are deleted when the last one lets go (release): once it has
// stopped, its calls drained and its pool stopped (retire).
//
// The remotes count their own the same way, per remote too
// (remotes/series.go); the JSON-RPC server deletes the wire's series of a
// chain when it stops serving it (jrpc.Server.Remove).

// chainSeries counts the chains built under each name, and deletes a
// name's series when none is left.
type chainSeries struct {
	mu   sync.Mutex
	held map[string]int
	drop []func(chain string) // each part's DropChain
}

// onDrop adds f to what deletes a chain's series.
func (s *chainSeries) onDrop(f func(chain string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop = append(s.drop, f)
}

// hold counts one more chain writing the series of name.
func (s *chainSeries) hold(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = make(map[string]int)
	}
	s.held[name]++
}

// release counts one chain of name fewer; the last deletes its series.
// They are deleted under the lock: a chain of the name built meanwhile
// holds them first, or resolves them after, afresh.
func (s *chainSeries) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[name]--; s.held[name] > 0 {
		return
	}
	delete(s.held, name)
	for _, f := range s.drop {
		f(name)
	}
}

// drop deletes chain's series of the parts every chain is built with.
func (m chainMetrics) drop(chain string) {
	m.head.DropChain(chain)
	m.stalker.DropChain(chain)
	m.election.DropChain(chain)
	m.heads.DropChain(chain)
	m.archive.DropChain(chain)
	m.router.DropChain(chain)
	m.subs.DropChain(chain)
	m.cache.DropChain(chain)
	m.feed.DropChain(chain)
}

// forget lets go of the series of c, which has stopped for good: its
// remotes' (and its chain's there) and its parts'.
func (cs *chains) forget(c *chain) {
	c.pool.DropSeries()
	cs.series.release(c.name)
}

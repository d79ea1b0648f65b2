package remotes

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A remote or chain a reload removes must take its series with it, or
// dashboards and alerts keep seeing its last values. Series are shared by
// name, though: a remote replaced under the same name, or a chain removed
// and added again (its chain id changed), writes the same series while
// the old one drains. So each holder counts itself in (holdRemote,
// holdChain) before it resolves a series, and the series are deleted when
// the last one lets go.

// seriesHolders counts who writes the series of each remote and chain.
type seriesHolders struct {
	mu      sync.Mutex
	remotes map[[2]string]int // chain, remote
	chains  map[string]int
}

// partialDeleter is a vector whose series can be deleted by some labels.
type partialDeleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

// vectors is every vector of the remotes' series: a new one joins here.
func (m *Metrics) vectors() []partialDeleter {
	vs := []partialDeleter{m.calls, m.latency, m.errors, m.failures, m.head, m.lag, m.healthy, m.breaker,
		m.inFlight, m.throttled, m.oldest, m.chainHead, m.blockTime, m.splits, m.shared, m.attempts}
	if m.mb != nil {
		vs = append(vs, m.mb)
	}
	if m.hs != nil {
		vs = append(vs, m.hs.hedges, m.hs.score)
	}
	if m.ig != nil {
		vs = append(vs, m.ig)
	}
	if m.cc != nil {
		vs = append(vs, m.cc.checks, m.cc.wrong)
	}
	if m.bm != nil {
		vs = append(vs, m.bm)
	}
	if m.sd != nil {
		vs = append(vs, m.sd.Shadow, m.sd.Routes)
	}
	return vs
}

// holdRemote counts one more remote writing the series of remote on
// chain.
func (m *Metrics) holdRemote(chain, remote string) {
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	if m.held.remotes == nil {
		m.held.remotes = make(map[[2]string]int)
	}
	m.held.remotes[[2]string{chain, remote}]++
}

// releaseRemote counts one remote fewer; the last deletes the series.
func (m *Metrics) releaseRemote(chain, remote string) {
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	k := [2]string{chain, remote}
	if m.held.remotes[k]--; m.held.remotes[k] > 0 {
		return
	}
	delete(m.held.remotes, k)
	m.deleteSeries(prometheus.Labels{"chain": chain, "remote": remote})
}

// holdChain counts one more pool writing the series of chain.
func (m *Metrics) holdChain(chain string) {
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	if m.held.chains == nil {
		m.held.chains = make(map[string]int)
	}
	m.held.chains[chain]++
}

// releaseChain counts one pool fewer; the last deletes every series of
// the chain (its remotes' too: they have let go by then).
func (m *Metrics) releaseChain(chain string) {
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	if m.held.chains[chain]--; m.held.chains[chain] > 0 {
		return
	}
	delete(m.held.chains, chain)
	m.deleteSeries(prometheus.Labels{"chain": chain})
}

func (m *Metrics) deleteSeries(l prometheus.Labels) {
	for _, v := range m.vectors() {
		v.DeletePartialMatch(l)
	}
}

// DropSeries deletes the series of the pool's chain and remotes, once it
// has stopped for good (a reload removed its chain): unless a pool of the
// same name (its chain id changed) holds them too. A pool stopped with
// the process keeps them, for the last scrape.
func (p *Pool) DropSeries() {
	p.release.Do(func() {
		for _, r := range p.members() {
			r.m.release()
		}
		p.m.releaseChain(p.conf().Chain)
	})
}

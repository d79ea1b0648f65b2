package chain

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/natsfeed"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
)

// A chain a reload removes takes its series with it, or dashboards and
// alerts keep seeing its last values (a head that stopped, a leader gauge
// at 1). Series are shared by name, though: a chain whose chain id
// changed is removed and added again in one reload, and the one added
// writes the same series while the one removed drains. So each chain
// built counts itself in before its parts resolve their series (hold), and
// the series are deleted when the last one lets go (release): once it has
// stopped, its calls drained and its pool stopped (Retire, Forget).
//
// The remotes count their own the same way, per remote too
// (remotes/series.go); the JSON-RPC server deletes the wire's series of a
// chain when it stops serving it (jrpc.Server.Remove).

// Metrics are the series every chain's parts register under, one set for
// the process, and the count of the chains built under each name.
type Metrics struct {
	head     *headstore.Metrics
	stalker  *stalker.Metrics
	election *stalker.ElectionMetrics
	heads    *stalker.HeadShareMetrics
	archive  *stalker.ArchiveMetrics
	router   *router.Metrics
	subs     *subcenter.Metrics
	cache    *cache.Metrics
	feed     *natsfeed.Metrics

	mu    sync.Mutex
	held  map[string]int
	drops []func(chain string) // OnDrop's
}

// NewMetrics registers the chains' series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{
		head:     headstore.NewMetrics(reg),
		stalker:  stalker.NewMetrics(reg),
		election: stalker.NewElectionMetrics(reg),
		heads:    stalker.NewHeadShareMetrics(reg),
		archive:  stalker.NewArchiveMetrics(reg),
		router:   router.NewMetrics(reg),
		subs:     subcenter.NewMetrics(reg),
		cache:    cache.NewMetrics(reg),
		feed:     natsfeed.NewMetrics(reg),
		held:     make(map[string]int),
	}
}

// OnDrop has f delete a chain's series too, those of a part the process
// builds beside its chains (the edge's), when the chain's go.
func (m *Metrics) OnDrop(f func(chain string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drops = append(m.drops, f)
}

// hold counts one more chain writing the series of name.
func (m *Metrics) hold(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[name]++
}

// release counts one chain of name fewer; the last deletes its series.
// They are deleted under the lock: a chain of the name built meanwhile
// holds them first, or resolves them after, afresh.
func (m *Metrics) release(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[name]--; m.held[name] > 0 {
		return
	}
	delete(m.held, name)
	m.drop(name)
}

// drop deletes chain's series of the parts every chain is built with.
func (m *Metrics) drop(chain string) {
	m.head.DropChain(chain)
	m.stalker.DropChain(chain)
	m.election.DropChain(chain)
	m.heads.DropChain(chain)
	m.archive.DropChain(chain)
	m.router.DropChain(chain)
	m.subs.DropChain(chain)
	m.cache.DropChain(chain)
	m.feed.DropChain(chain)
	for _, f := range m.drops {
		f(chain)
	}
}

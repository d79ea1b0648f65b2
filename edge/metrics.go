package edge

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the edge's collectors. A nil *metrics (no Registerer)
// records nothing.
type metrics struct {
	auth            *prometheus.CounterVec
	rateLimited     *prometheus.CounterVec
	limiterFailures prometheus.Counter
	credit          *creditMetrics
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	return &metrics{
		auth: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "auth_rejections_total",
			Help:      "Requests and calls refused by API keys, the method blocklist or CORS, by chain and reason.",
		}, []string{"chain", "reason"})),
		rateLimited: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "ratelimit_rejections_total",
			Help:      "Requests refused by a rate limit, by chain and the limit's scope (key or ip).",
		}, []string{"chain", "scope"})),
		limiterFailures: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "ratelimit_redis_errors_total",
			Help:      "Rate-limit decisions Redis could not make; their calls were served (fail open) or refused (fail closed).",
		})),
	}
}

// register registers c, or returns the collector already registered in its
// place (an edge rebuilt on the same registry). Any other failure is a
// programming error, as with MustRegister.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	var are prometheus.AlreadyRegisteredError
	switch err := reg.Register(c); {
	case err == nil:
		return c
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("edge: register metrics of %T", c))
}

func (m *metrics) limiterFailed() {
	if m != nil {
		m.limiterFailures.Inc()
	}
}

// chainEdge is the edge's state for one chain: its metric children, cached
// so a refusal costs no label hashing, and the caller of every request
// when nothing is worked out per request.
type chainEdge struct {
	name    string
	auth    [numAuthReasons]prometheus.Counter // nil when metrics are off
	limited [numLimitScopes]prometheus.Counter
	open    client
	dropped atomic.Bool // DropChain forgot it: chains.last must not return it
}

func (c *chainEdge) authRejected(r authReason) {
	if c.auth[r] != nil {
		c.auth[r].Inc()
	}
}

func (c *chainEdge) rateLimited(sc limitScope) {
	if c.limited[sc] != nil {
		c.limited[sc].Inc()
	}
}

// chains holds a chainEdge per chain, made on the chain's first request:
// the Server asks only about configured chains, a bounded set. Readers
// load the map lock-free (every request does); a new chain copies it.
type chains struct {
	mu     sync.Mutex
	byName atomic.Pointer[map[string]*chainEdge]
	// last is the chain last looked up in byName: most requests are for
	// the same chain as the one before, found by comparing its name.
	last atomic.Pointer[chainEdge]
}

// chain returns the chain's state, making it on first use.
func (e *Edge) chain(name string) *chainEdge {
	if ch := e.chains.last.Load(); ch != nil && ch.name == name && !ch.dropped.Load() {
		return ch
	}
	if m := e.chains.byName.Load(); m != nil {
		if ch := (*m)[name]; ch != nil {
			e.chains.last.Store(ch)
			return ch
		}
	}
	e.chains.mu.Lock()
	defer e.chains.mu.Unlock()
	old := e.chains.byName.Load()
	if old != nil && (*old)[name] != nil {
		return (*old)[name]
	}
	ch := &chainEdge{name: name}
	ch.open = client{e: e, ch: ch}
	if m := e.metrics; m != nil {
		for r := range numAuthReasons {
			ch.auth[r] = m.auth.WithLabelValues(name, r.String())
		}
		for sc := range numLimitScopes {
			ch.limited[sc] = m.rateLimited.WithLabelValues(name, sc.String())
		}
	}
	next := make(map[string]*chainEdge, 1)
	if old != nil {
		next = maps.Clone(*old)
	}
	next[name] = ch
	e.chains.byName.Store(&next)
	return ch
}

// DropChain forgets the chain, once a reload removed it and its requests
// have finished: its series are deleted, in every Edge on these metrics,
// and a request for a chain of that name added later counts afresh. An
// older Edge a request still holds counts it no more.
func (e *Edge) DropChain(name string) {
	e.chains.mu.Lock()
	if old := e.chains.byName.Load(); old != nil && (*old)[name] != nil {
		(*old)[name].dropped.Store(true)
		next := maps.Clone(*old)
		delete(next, name)
		e.chains.byName.Store(&next)
	}
	e.chains.mu.Unlock()
	if m := e.metrics; m != nil {
		l := prometheus.Labels{"chain": name}
		m.auth.DeletePartialMatch(l)
		m.rateLimited.DeletePartialMatch(l)
	}
}

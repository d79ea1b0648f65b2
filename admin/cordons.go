package admin

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/venn-gateway/venn/remotes"
)

// cordonStore keeps the manual cordons of every chain: in Redis, shared by
// the cluster's replicas, or in memory for this process alone.
type cordonStore interface {
	list(ctx context.Context, chain string) ([]remotes.ManualCordon, error)
	put(ctx context.Context, chain string, c remotes.ManualCordon) error
	// remove reports whether there was a cordon to remove.
	remove(ctx context.Context, chain, remote string) (bool, error)
	// watch calls changed with a chain's name when its cordons changed,
	// maybe on another replica, until ctx ends. Messages may be missed: the
	// syncer re-reads every CordonResync anyway.
	watch(ctx context.Context, chains []string, changed func(chain string))
}

// memoryCordons is the store without Redis.
type memoryCordons struct {
	mu      sync.Mutex
	cordons map[string]map[string]remotes.ManualCordon // chain, remote
	notify  chan string
}

var _ cordonStore = (*memoryCordons)(nil)

func newMemoryCordons() *memoryCordons {
	return &memoryCordons{cordons: map[string]map[string]remotes.ManualCordon{}, notify: make(chan string, 16)}
}

func (m *memoryCordons) list(_ context.Context, chain string) ([]remotes.ManualCordon, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]remotes.ManualCordon, 0, len(m.cordons[chain]))
	for _, c := range m.cordons[chain] {
		out = append(out, c)
	}
	return out, nil
}

func (m *memoryCordons) put(_ context.Context, chain string, c remotes.ManualCordon) error {
	m.mu.Lock()
	if m.cordons[chain] == nil {
		m.cordons[chain] = map[string]remotes.ManualCordon{}
	}
	m.cordons[chain][c.Remote] = c
	m.mu.Unlock()
	m.changed(chain)
	return nil
}

func (m *memoryCordons) remove(_ context.Context, chain, remote string) (bool, error) {
	m.mu.Lock()
	_, ok := m.cordons[chain][remote]
	delete(m.cordons[chain], remote)
	m.mu.Unlock()
	m.changed(chain)
	return ok, nil
}

// changed tells the watcher, or leaves it to the next resync when it is
// behind.
func (m *memoryCordons) changed(chain string) {
	select {
	case m.notify <- chain:
	default:
	}
}

func (m *memoryCordons) watch(ctx context.Context, _ []string, changed func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case chain := <-m.notify:
			changed(chain)
		}
	}
}

// syncer applies the stored cordons to the chains' pools: on every change
// it is told of, and every resync (a missed message, an expiry).
type syncer struct {
	store  cordonStore
	chains func() []Chain
	every  time.Duration
	now    func() time.Time
	onErr  func(chain string, err error)

	mu sync.Mutex // one sync at a time: an older list never lands after a newer one
}

func (s *syncer) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	cs := s.chains()
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	wg.Go(func() { s.store.watch(ctx, names, func(chain string) { s.sync(ctx, chain) }) })
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.syncAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *syncer) syncAll(ctx context.Context) {
	for _, c := range s.chains() {
		s.sync(ctx, c.Name)
	}
}

// sync reads one chain's cordons and hands them to its pool. A failed
// read leaves the pool as it was.
func (s *syncer) sync(ctx context.Context, chain string) {
	cs := s.chains()
	i := slices.IndexFunc(cs, func(c Chain) bool { return c.Name == chain })
	if i < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list, err := s.store.list(ctx, chain)
	if err != nil {
		if ctx.Err() == nil {
			s.onErr(chain, err)
		}
		return
	}
	s.chains()[i].Pool.SetCordons(s.now(), list)
}

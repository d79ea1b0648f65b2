package admin

import (
	"context"
	"fmt"
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
	// maybe on another replica, until ctx ends; it hears of the chains in
	// chains(), read again on each rechain. Messages may be missed: the
	// syncer re-reads every CordonResync anyway.
	watch(ctx context.Context, chains func() []string, rechain <-chan struct{}, changed func(chain string))
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

func (m *memoryCordons) watch(ctx context.Context, _ func() []string, _ <-chan struct{}, changed func(string)) {
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
	// rechain tells the watch that the chains changed (setChains), to
	// subscribe to the added ones.
	rechain chan struct{}

	mu sync.Mutex // one sync at a time: an older list never lands after a newer one
	// last is each chain's list as last read: re-applied when a read fails,
	// so expiries and the last-remote rule go on without the store.
	last map[string][]remotes.ManualCordon
}

func newSyncer(store cordonStore, chains func() []Chain, every time.Duration, now func() time.Time,
	onErr func(string, error)) *syncer {
	return &syncer{store: store, chains: chains, every: every, now: now, onErr: onErr,
		rechain: make(chan struct{}, 1), last: map[string][]remotes.ManualCordon{}}
}

func (s *syncer) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.store.watch(ctx, s.names, s.rechain, func(chain string) { s.sync(ctx, chain) }) })
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

// names lists the chains' names.
func (s *syncer) names() []string {
	cs := s.chains()
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// rechained tells the watch of a new chain list, or leaves it a note it
// reads after the one it is at.
func (s *syncer) rechained() {
	select {
	case s.rechain <- struct{}{}:
	default:
	}
}

func (s *syncer) syncAll(ctx context.Context) {
	cs := s.chains()
	for _, c := range cs {
		s.syncChain(ctx, c)
	}
	s.mu.Lock()
	for name := range s.last {
		if !slices.ContainsFunc(cs, func(c Chain) bool { return c.Name == name }) {
			delete(s.last, name)
		}
	}
	s.mu.Unlock()
}

// sync reads one chain's cordons and hands them to its pool.
func (s *syncer) sync(ctx context.Context, chain string) {
	cs := s.chains()
	if i := slices.IndexFunc(cs, func(c Chain) bool { return c.Name == chain }); i >= 0 {
		s.syncChain(ctx, cs[i])
	}
}

// syncChain reads c's cordons and hands them to c's pool: the pool of the
// same snapshot, whatever a reload did meanwhile (setChains syncs the new
// list after). A failed read re-applies the last list read.
func (s *syncer) syncChain(ctx context.Context, c Chain) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { // on the watch's and the ticker's goroutines: a bug must not end the process
		if v := recover(); v != nil {
			s.onErr(c.Name, fmt.Errorf("cordon sync panicked: %v", v))
		}
	}()
	list, err := s.store.list(ctx, c.Name)
	switch {
	case err == nil:
		s.last[c.Name] = list
	case ctx.Err() != nil:
		return
	default:
		s.onErr(c.Name, err)
		var ok bool
		if list, ok = s.last[c.Name]; !ok {
			return
		}
	}
	c.Pool.SetCordons(s.now(), list)
}

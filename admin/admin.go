package admin

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Options are what the app hands the admin API.
type Options struct {
	Config     Config // defaulted
	Replica    string // this replica's ID
	Version    string
	ConfigFile string // "" the built-in default
	Chains     []Chain
	// Effective is the running config: GET /admin/config shows it with its
	// secrets redacted (Redact).
	Effective any
	// Redis shares cordons and heartbeats with the cluster; nil keeps them
	// in this process.
	Redis redis.UniversalClient
	Drain Drainer // nil: POST /admin/drain answers 501
	// Draining reports whether the process is draining for any reason (a
	// drain, the shutdown); nil: only after a drain through the API.
	Draining func() bool
	Reload   Reloader // nil: POST /admin/reload answers 501
	// Usage reads tenants' usage for GET /admin/usage; nil answers 501.
	Usage      UsageReader
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Gatherer is read for each chain's traffic (answers by source, error
	// share); nil leaves it out.
	Gatherer prometheus.Gatherer
	Now      func() time.Time // nil: time.Now; the cordons' expiry goes by it
}

// Admin is the admin API of one replica. New does no I/O; Start begins the
// cordon sync and the heartbeat, Stop ends them.
type Admin struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	store   cordonStore
	sync    *syncer
	m       *metrics
	started time.Time

	pages   sessions                // page.go: the status page's signed-in browsers
	signins signinThrottle          // page_guard.go: failed sign-ins
	traffic trafficHistory          // traffic_window.go: the recent error shares
	charts  chartRing               // charts.go: the status page's charts
	tokens  atomic.Pointer[[]token] // Config.Tokens, then SetTokens's

	chainsMu sync.RWMutex
	chains   []Chain // opts.Chains, then Reloaded's
	// effective is the running config a reload applied; nil: opts.Effective.
	effective atomic.Pointer[any]
	draining  atomic.Bool
	mu        sync.Mutex // actions that change state: one at a time
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New builds the admin API over opts.
func New(opts Options) *Admin {
	opts.Config = opts.Config.WithDefaults()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Admin{opts: opts, log: opts.Logger, now: opts.Now, m: newMetrics(opts.Registerer), started: opts.Now(),
		chains: opts.Chains}
	a.tokens.Store(tokensOf(opts.Config.Tokens))
	if opts.Redis != nil {
		a.store = &redisCordons{rdb: opts.Redis}
	} else {
		a.store = newMemoryCordons()
	}
	a.sync = newSyncer(a.store, a.chainList, opts.Config.CordonResync, opts.Now, func(chain string, err error) {
		a.log.Warn("admin: cannot read manual cordons; the last ones read still apply", "chain", chain, "err", err)
	})
	return a
}

// Start runs the cordon sync and, with Redis, the heartbeat until Stop.
func (a *Admin) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Go(func() { a.sync.run(ctx) })
	a.wg.Go(func() { a.runCharts(ctx) })
	if a.opts.Redis != nil {
		a.wg.Go(func() { a.heartbeats(ctx) })
	}
	return nil
}

// Stop ends what Start began and waits for it, at most until ctx ends.
func (a *Admin) Stop(ctx context.Context) error {
	if a.cancel == nil {
		return nil
	}
	a.cancel()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("admin: stop: %w", ctx.Err())
	}
}

// Reloaded takes what a hot reload applied: the chains served now (added,
// removed or rebuilt chains and pools) and the running config GET
// /admin/config shows. New pools get the stored cordons at once, and hear
// of later changes by message like the others.
func (a *Admin) Reloaded(ctx context.Context, cs []Chain, effective any) {
	a.effective.Store(&effective)
	a.setChains(ctx, cs)
}

func (a *Admin) setChains(ctx context.Context, cs []Chain) {
	a.chainsMu.Lock()
	a.chains = slices.Clone(cs)
	a.chainsMu.Unlock()
	a.sync.rechained()
	a.sync.syncAll(ctx)
}

// running is the config GET /admin/config shows.
func (a *Admin) running() any {
	if e := a.effective.Load(); e != nil {
		return *e
	}
	return a.opts.Effective
}

func (a *Admin) chainList() []Chain {
	a.chainsMu.RLock()
	defer a.chainsMu.RUnlock()
	return a.chains
}

// Draining reports whether this replica is draining: drained through the
// API, or as Options.Draining says.
func (a *Admin) Draining() bool {
	return a.draining.Load() || a.opts.Draining != nil && a.opts.Draining()
}

func (a *Admin) heartbeats(ctx context.Context) {
	every := a.opts.Config.Heartbeat
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		err := writeHeartbeat(ctx, a.opts.Redis, a.opts.Replica, presenceBeats*every,
			heartbeat{Version: a.opts.Version, Started: a.started, Seen: a.now()})
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			a.log.Warn("admin: heartbeat failing", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			// A clean stop leaves the list at once; a killed process
			// leaves it when its presence key expires.
			rctx, cancel := context.WithTimeout(context.Background(), every)
			defer cancel()
			if err := removeHeartbeat(rctx, a.opts.Redis, a.opts.Replica); err != nil {
				a.log.Debug("admin: remove heartbeat", "err", err)
			}
			return
		case <-t.C:
		}
	}
}

// leads lists the chains this replica leads now, as it sees itself.
func (a *Admin) leads() []string {
	var out []string
	for _, c := range a.chainList() {
		if c.State != nil && c.State().Leading {
			out = append(out, c.Name)
		}
	}
	return out
}

// leaders maps each replica to the chains whose lease it holds in Redis:
// the one account of leadership, so that two replicas never both show as
// leading a chain. Chains whose lease cannot be read are left out.
func (a *Admin) leaders(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	for _, c := range a.chainList() {
		if c.Leader == nil {
			continue
		}
		if l, ok, err := c.Leader(ctx); err == nil && ok {
			out[l.Replica] = append(out[l.Replica], c.Name)
		}
	}
	return out
}

// replicas lists the cluster's replicas, this one first: those whose
// heartbeat lives, each leading the chains whose lease it holds.
func (a *Admin) replicas(ctx context.Context) ([]ReplicaView, error) {
	self := ReplicaView{Replica: a.opts.Replica, Version: a.opts.Version, Started: a.started, LastSeen: a.now(), Self: true}
	if a.opts.Redis == nil {
		self.Leads = a.leads()
		return []ReplicaView{self}, nil
	}
	leads := a.leaders(ctx)
	self.Leads = leads[a.opts.Replica]
	rs, err := readReplicas(ctx, a.opts.Redis)
	if err != nil {
		return []ReplicaView{self}, err
	}
	rs = slices.DeleteFunc(rs, func(r ReplicaView) bool { return r.Replica == a.opts.Replica })
	sort.Slice(rs, func(i, j int) bool { return rs[i].Replica < rs[j].Replica })
	for i := range rs {
		rs[i].Leads = leads[rs[i].Replica]
	}
	return append([]ReplicaView{self}, rs...), nil
}

// overview reads everything GET /admin/status answers.
func (a *Admin) overview(ctx context.Context) Overview {
	o := Overview{Replica: a.opts.Replica, Version: a.opts.Version, ConfigFile: a.opts.ConfigFile,
		Started: a.started, Draining: a.Draining()}
	mfs := gather(a.opts.Gatherer) // once: the registry of many chains is large
	tr := traffic(mfs)
	a.traffic.recent(a.now(), tr)
	cs := a.chainList()
	live := sampleCharts(mfs, cs, a.now())
	for _, c := range cs {
		v := a.chainView(ctx, c, true)
		v.Traffic = tr[c.Name]
		rv := chartView(a.charts.samples(c.Name, live[c.Name]))
		v.Recent = &rv
		o.Chains = append(o.Chains, v)
	}
	rs, err := a.replicas(ctx)
	if err != nil {
		a.log.Debug("admin: read replicas", "err", err)
	}
	o.Replicas = rs
	return o
}

// chain finds a chain by name.
func (a *Admin) chain(name string) (Chain, bool) {
	cs := a.chainList()
	i := slices.IndexFunc(cs, func(c Chain) bool { return c.Name == name })
	if i < 0 {
		return Chain{}, false
	}
	return cs[i], true
}

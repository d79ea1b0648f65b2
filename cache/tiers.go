package cache

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
)

// claimPoll is how often a replica that lost a claim looks for the
// winner's answer.
const claimPoll = 20 * time.Millisecond

// Layer is one tier below memory as app appends it (Config.RedisLayer,
// Config.PostgresLayer).
type Layer struct {
	Tier Tier
	// Keep reports whether e is stored in this tier; nil: every entry.
	Keep func(e Entry) bool
	// SettledTTL and RecentTTL are how long settled and near-head entries
	// are kept (0: the tier's longest).
	SettledTTL, RecentTTL time.Duration
}

// RedisLayer is the cluster's shared tier: settled entries for
// settled_ttl, near-head ones for recent_ttl.
func (c Config) RedisLayer(t Tier) Layer {
	return Layer{Tier: t, SettledTTL: c.SettledTTL, RecentTTL: c.RecentTTL}
}

// PostgresLayer is the durable tier: settled entries of postgres_methods,
// for postgres_retention.
func (c Config) PostgresLayer(t Tier) Layer {
	methods := c.PostgresMethods
	return Layer{Tier: t, SettledTTL: c.PostgresRetention,
		Keep: func(e Entry) bool { return e.Settled && evm.MatchMethod(methods, e.Method) }}
}

// layer is a tier in a chain's cache, with its health and series.
type layer struct {
	Layer
	name  string
	chain string
	log   *slog.Logger
	m     *Metrics
	// down is set from a tier's first failure until its next success:
	// one log line each way per outage.
	down      atomic.Bool
	evictions *prometheus.CounterVec // by reason, curried
	// inProcess: the tier cannot block (memory), so its operations need no
	// deadline of their own, whose timer and context a hit would pay for.
	inProcess bool
	hits      atomic.Uint64 // lookups this tier answered, for State
	closed    *closing      // the cache's (Cache.closed): failures are then only logged
	// timeout bounds one operation of a tier below memory (tier_timeout):
	// a slow Redis costs a call at most this, then it is a miss.
	timeout time.Duration
}

func newLayer(l Layer, chain string, timeout time.Duration, log *slog.Logger, m *Metrics, closed *closing) *layer {
	name := l.Tier.Name()
	_, inProcess := l.Tier.(*Memory)
	return &layer{Layer: l, name: name, chain: chain, timeout: timeout, log: log, m: m, inProcess: inProcess, closed: closed,
		evictions: m.evictions.MustCurryWith(prometheus.Labels{"chain": chain, "tier": name})}
}

// keeps reports whether e belongs in this tier.
func (l *layer) keeps(e Entry) bool { return l.Keep == nil || l.Keep(e) }

// ttl is how long this tier keeps e.
func (l *layer) ttl(e Entry) time.Duration {
	if e.Settled {
		return l.SettledTTL
	}
	return l.RecentTTL
}

// failed counts a failed operation, and logs the tier's outage when it
// starts.
func (l *layer) failed(op string, err error) {
	l.closed.ifOpen(func() { l.m.storeErrors.WithLabelValues(l.chain, l.name, op).Inc() })
	if l.down.CompareAndSwap(false, true) {
		l.log.Warn("cache tier unavailable; its lookups are misses until it answers",
			"tier", l.name, "op", op, "err", err)
	}
}

// ok logs the end of the tier's outage.
func (l *layer) ok() {
	if l.down.Load() && l.down.CompareAndSwap(true, false) {
		l.log.Info("cache tier answers again", "tier", l.name)
	}
}

// opContext bounds one operation of a tier: its own deadline, and not the
// client's cancellation (a store after the answer was sent still counts).
// An in-process tier's operations are not bounded: they cannot block.
func (l *layer) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.inProcess {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
}

// sizeContext bounds one Size of the tier, at a scrape or for State: off
// the calls' path, so at least sizeTimeout.
func (l *layer) sizeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(sizeTimeout, l.timeout))
}

// get asks one tier; an error is a miss.
func (l *layer) get(ctx context.Context, k Key) (Entry, bool) {
	ctx, cancel := l.opContext(ctx)
	defer cancel()
	e, ok, err := l.Tier.Get(ctx, k)
	if err != nil {
		l.failed("get", err)
		return Entry{}, false
	}
	l.ok()
	return e, ok
}

// set stores e in the tier, when it keeps it; an error is counted.
func (l *layer) set(ctx context.Context, k Key, e Entry) bool {
	if !l.keeps(e) {
		return false
	}
	ctx, cancel := l.opContext(ctx)
	defer cancel()
	if err := l.Tier.Set(ctx, k, e, l.ttl(e)); err != nil {
		l.failed("set", err)
		return false
	}
	l.ok()
	return true
}

// claim asks a Claimer tier whether this replica is to ask upstream for
// k; mine is true too when the tier cannot say.
func (l *layer) claim(ctx context.Context, c Claimer, k Key, hold time.Duration) bool {
	cctx, cancel := l.opContext(ctx)
	defer cancel()
	mine, err := c.Claim(cctx, k, hold)
	if err != nil {
		l.failed("claim", err)
		return true
	}
	l.ok()
	return mine
}

// release ends this replica's claim on k, whose fetch stored nothing in
// the tier; a failure is counted (the claim then expires, and this
// replica's next Claim of k is its own again).
func (l *layer) release(ctx context.Context, c Claimer, k Key) {
	if l.down.Load() {
		return // the claim was no one's: the tier did not answer it
	}
	rctx, cancel := l.opContext(ctx)
	defer cancel()
	if err := c.Release(rctx, k); err != nil {
		l.failed("release", err)
		return
	}
	l.ok()
}

// await polls the tier for the answer of the replica that claimed k,
// until it appears (ok), the claim ends without one (nothing is coming:
// the caller asks upstream itself), hold passes or ctx ends.
func (l *layer) await(ctx context.Context, c Claimer, k Key, hold time.Duration) (Entry, bool) {
	deadline := time.NewTimer(hold)
	defer deadline.Stop()
	tick := time.NewTicker(claimPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return Entry{}, false
		case <-deadline.C:
			return Entry{}, false
		case <-tick.C:
			wctx, cancel := l.opContext(ctx)
			e, ok, claimed, err := c.Watch(wctx, k)
			cancel()
			if err != nil {
				l.failed("watch", err)
				return Entry{}, false
			}
			l.ok()
			if ok {
				return e, true
			}
			if !claimed {
				return Entry{}, false
			}
		}
	}
}

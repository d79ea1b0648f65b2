package stalker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// DefaultLeaseTTL is how long a leader's lease lives in Redis without renewal.
// It bounds failover after a leader dies without releasing (kill -9, lost
// host): followers retry every TTL/4, so a dead leader is replaced within
// about TTL + TTL/4.
const DefaultLeaseTTL = 2 * time.Second

// minLeaseTTL keeps TTL/4 and the PX argument (milliseconds) above zero.
const minLeaseTTL = 20 * time.Millisecond

// Elector runs the campaign for one chain.
type Elector interface {
	// Run campaigns until ctx ends. While this replica leads, lead runs with a
	// context that is cancelled when leadership is lost or ctx ends; Run waits
	// for lead to return before campaigning again, and releases the lease after lead returns
	// when ctx ended (clean shutdown). epoch is the fencing token.
	Run(ctx context.Context, lead func(ctx context.Context, epoch uint64))
}

var (
	_ Elector = (*RedisElector)(nil)
	_ Elector = (*MemoryElector)(nil)
)

// ElectionConfig configures an elector for one chain.
type ElectionConfig struct {
	// Chain names the chain; it is the Redis Cluster hash tag of the keys, so
	// it must not be empty.
	Chain string
	// ReplicaID names this replica in the lease value and the logs; empty
	// picks a random one. It must be unique across replicas: the epoch
	// starts again from 1 when Redis loses its data, and only the ID then
	// tells one leadership "id:1" from another.
	ReplicaID string
	// TTL is the lease's lifetime in Redis; 0 means DefaultLeaseTTL.
	TTL time.Duration
	// Logger receives leadership changes; nil discards.
	Logger *slog.Logger
	// Metrics receives leadership gauges; nil keeps unregistered ones.
	Metrics *ElectionMetrics
}

// Why a term ended; the cause of the lead context.
var (
	errLeaseLost     = errors.New("lease no longer ours")
	errRenewDeadline = errors.New("lease not renewed before the safety deadline")
	errLeadReturned  = errors.New("lead returned")
)

// RedisElector elects one leader per chain across replicas with a Redis
// lease (SET NX PX) that carries a fencing epoch.
//
// A leader stops leading (cancels lead's context) when a renew finds the
// lease gone or taken, or when it has not renewed for 3/4 of the TTL,
// measured on the local monotonic clock from before the last successful
// request was sent. Redis counts the TTL from when it received that request,
// which is later, so the leader steps down at least TTL/4 before anyone else
// can acquire; the epoch fences whatever a slow leader still writes.
//
// The deadline is kept by a timer, not by the client, so lead's context ends
// on time however the client behaves. Run itself waits for its Redis calls,
// though, and go-redis bounds a call by its context only with
// Options.ContextTimeoutEnabled; without it a hung call lasts up to the
// client's ReadTimeout, and so may Run's return.
type RedisElector struct {
	rdb     redis.UniversalClient
	id      string
	ttl     time.Duration
	keys    keyspace.Chain // the lease and the epoch it fences with
	log     *slog.Logger
	leader  prometheus.Gauge
	changes prometheus.Counter
}

// NewRedisElector returns an elector for cfg.Chain on rdb. It does no I/O.
func NewRedisElector(rdb redis.UniversalClient, cfg ElectionConfig) *RedisElector {
	cfg = cfg.withDefaults()
	return &RedisElector{
		rdb:     rdb,
		id:      cfg.ReplicaID,
		ttl:     cfg.TTL,
		keys:    keyspace.For(cfg.Chain),
		log:     cfg.Logger.With("chain", cfg.Chain, "replica", cfg.ReplicaID),
		leader:  cfg.Metrics.leader.WithLabelValues(cfg.Chain),
		changes: cfg.Metrics.changes.WithLabelValues(cfg.Chain),
	}
}

func (c ElectionConfig) withDefaults() ElectionConfig {
	if c.TTL <= 0 {
		c.TTL = DefaultLeaseTTL
	}
	c.TTL = max(c.TTL, minLeaseTTL)
	if c.ReplicaID == "" {
		c.ReplicaID = randomID()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewElectionMetrics(nil)
	}
	return c
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails, per crypto/rand
	return hex.EncodeToString(b[:])
}

// value is the lease value of one leadership.
func (e *RedisElector) value(epoch uint64) string {
	return e.id + ":" + strconv.FormatUint(epoch, 10)
}

// interval is how often a leader renews and a follower retries.
func (e *RedisElector) interval() time.Duration { return e.ttl / 4 }

// safeFor is how long after sending its last successful request a leader
// may go on leading: the TTL less a safety margin for clock drift and for
// lead to notice its cancelled context.
func (e *RedisElector) safeFor() time.Duration { return e.ttl - e.ttl/4 }

// Acquire takes the lease if it is free and returns the new epoch. ok is
// false, with a nil error, when another leadership holds the lease.
func (e *RedisElector) Acquire(ctx context.Context) (epoch uint64, ok bool, err error) {
	n, err := keyspace.Acquire.Run(ctx, e.rdb, e.keys.LeaseKeys(),
		e.id, e.ttl.Milliseconds()).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("acquire lease %s: %w", e.keys.Lease, err)
	case n <= 0:
		return 0, false, fmt.Errorf("acquire lease %s: bad epoch %d", e.keys.Lease, n)
	}
	return uint64(n), true, nil
}

// Renew extends the lease of the leadership with epoch. It reports false
// when the lease is no longer that leadership's: expired, deleted, or taken.
func (e *RedisElector) Renew(ctx context.Context, epoch uint64) (bool, error) {
	n, err := keyspace.Renew.Run(ctx, e.rdb, []string{e.keys.Lease},
		e.value(epoch), e.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", e.keys.Lease, err)
	}
	return n == 1, nil
}

// Release deletes the lease if the leadership with epoch still holds it;
// a lease taken by someone else is left alone.
func (e *RedisElector) Release(ctx context.Context, epoch uint64) error {
	if err := keyspace.Release.Run(ctx, e.rdb, []string{e.keys.Lease}, e.value(epoch)).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", e.keys.Lease, err)
	}
	return nil
}

// Run campaigns until ctx ends; see Elector. It also releases the lease when
// lead returns on its own, and campaigns again TTL/4 later. Panics in lead
// propagate, after the renewal has stopped and the lease has been released.
// Run is not to be called again before it returns.
func (e *RedisElector) Run(ctx context.Context, lead func(ctx context.Context, epoch uint64)) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		// The clock starts before the request is sent: Redis starts the TTL
		// later than that, never earlier.
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, e.safeFor())
		epoch, ok, err := e.Acquire(actx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			// Log once per outage: followers retry four times per TTL.
			if !failing {
				e.log.Warn("leader election failing", "err", err)
			}
			failing = true
		case err == nil:
			if failing {
				e.log.Info("leader election recovered")
			}
			failing = false
		}
		if ok {
			e.term(ctx, epoch, sent, lead)
		}
		// After a term too: a lead that returns at once must not spin.
		wait.Reset(e.interval())
	}
}

// term is one leadership: it renews the lease while lead runs and ends it
// when lead returns.
func (e *RedisElector) term(ctx context.Context, epoch uint64, sent time.Time, lead func(context.Context, uint64)) {
	leadCtx, cancel := context.WithCancelCause(ctx)
	// The deadline is a timer of its own, so a renew stuck in the client
	// cannot hold it back.
	deposed := time.AfterFunc(time.Until(sent.Add(e.safeFor())), func() { cancel(errRenewDeadline) })
	var wg sync.WaitGroup
	wg.Go(func() { e.renew(leadCtx, cancel, epoch, sent, deposed) })

	e.leader.Set(1)
	e.changes.Inc()
	log := e.log.With("epoch", epoch)
	log.Info("leader elected")

	returned := false
	defer func() {
		cancel(errLeadReturned) // no-op when the term already ended
		e.leader.Set(0)
		cause := context.Cause(leadCtx)
		lost := errors.Is(cause, errLeaseLost) || errors.Is(cause, errRenewDeadline)
		if lost {
			// Said before waiting for the renewer, which may be stuck in
			// a client that does not honour deadlines.
			log.Info("leadership lost", "reason", cause)
		}
		wg.Wait()
		deposed.Stop() // after the renewer, which resets it
		if errors.Is(cause, errLeaseLost) {
			return
		}
		// Free the lease for the others rather than make them wait out the
		// TTL. After a missed deadline Redis may well still hold it (the
		// network failed, not the lease); the release is compare-and-delete,
		// so it never touches a newer leadership.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.interval())
		err := e.Release(rctx, epoch)
		rcancel()
		if lost {
			if err != nil {
				log.Debug("lease left to expire", "err", err)
			}
			return
		}
		reason := "shutdown"
		switch {
		case !returned:
			reason = "lead panicked"
		case errors.Is(cause, errLeadReturned):
			reason = cause.Error()
		}
		if err != nil {
			// The lease expires on its own within the TTL.
			log.Warn("leadership released, lease left to expire", "reason", reason, "err", err)
			return
		}
		log.Info("leadership released", "reason", reason)
	}()
	lead(leadCtx, epoch)
	returned = true
}

// renew keeps the lease of epoch alive until ctx ends. A renew that finds
// the lease gone ends the term at once; failed renews are retried until the
// deposed timer fires. sent is when the acquire was sent.
func (e *RedisElector) renew(ctx context.Context, cancel context.CancelCauseFunc, epoch uint64, sent time.Time, deposed *time.Timer) {
	retry := max(e.interval()/4, time.Millisecond)
	next := time.NewTimer(e.interval() - time.Since(sent))
	defer next.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		at := time.Now()
		// One attempt may not use up the time left: a stuck connection
		// should cost one try, not the leadership.
		until := sent.Add(e.safeFor())
		if t := at.Add(e.interval()); t.Before(until) {
			until = t
		}
		rctx, rcancel := context.WithDeadline(ctx, until)
		ok, err := e.Renew(rctx, epoch)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Warn once per outage; the retries follow every TTL/16.
			lvl := slog.LevelDebug
			if !failing {
				lvl = slog.LevelWarn
			}
			failing = true
			e.log.Log(ctx, lvl, "lease renew failed, retrying until the deadline",
				"epoch", epoch, "deadline", time.Until(sent.Add(e.safeFor())).Round(time.Millisecond), "err", err)
			next.Reset(retry)
		case !ok:
			cancel(errLeaseLost)
			return
		default:
			failing = false
			// Stop fails when the timer has fired: the renew came too late.
			if !deposed.Stop() {
				return
			}
			sent = at
			deposed.Reset(time.Until(sent.Add(e.safeFor())))
			next.Reset(e.interval() - time.Since(sent))
		}
	}
}

// MemoryElector is the elector without Redis: this process leads every
// chain, always with epoch 1.
type MemoryElector struct {
	ttl     time.Duration
	log     *slog.Logger
	leader  prometheus.Gauge
	changes prometheus.Counter
}

// NewMemoryElector returns an elector that leads cfg.Chain at once.
func NewMemoryElector(cfg ElectionConfig) *MemoryElector {
	cfg = cfg.withDefaults()
	return &MemoryElector{
		ttl:     cfg.TTL,
		log:     cfg.Logger.With("chain", cfg.Chain, "replica", cfg.ReplicaID),
		leader:  cfg.Metrics.leader.WithLabelValues(cfg.Chain),
		changes: cfg.Metrics.changes.WithLabelValues(cfg.Chain),
	}
}

// Run leads with epoch 1 until ctx ends. Should lead return early it is
// started again after TTL/4, as a Redis elector would re-elect.
func (e *MemoryElector) Run(ctx context.Context, lead func(ctx context.Context, epoch uint64)) {
	const epoch = 1
	log := e.log.With("epoch", epoch)
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		func() {
			e.leader.Set(1)
			e.changes.Inc()
			log.Info("leader elected")
			defer func() {
				e.leader.Set(0)
				log.Info("leadership released")
			}()
			lead(ctx, epoch)
		}()
		wait.Reset(e.ttl / 4)
	}
}

// ElectionMetrics are the election's Prometheus series, labelled by chain.
type ElectionMetrics struct {
	leader  *prometheus.GaugeVec
	changes *prometheus.CounterVec
}

// NewElectionMetrics registers the election's series on reg; a nil reg
// registers nothing (the series still work).
func NewElectionMetrics(reg prometheus.Registerer) *ElectionMetrics {
	m := &ElectionMetrics{
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "leader",
			Help: "1 while this replica leads the chain, else 0."}, []string{"chain"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "leader_changes_total",
			Help: "Leaderships of the chain acquired by this replica."}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.changes)
	}
	return m
}

// DropChain deletes chain's series, once its campaign has ended for good
// (a reload removed the chain).
func (m *ElectionMetrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	m.leader.DeletePartialMatch(l)
	m.changes.DeletePartialMatch(l)
}

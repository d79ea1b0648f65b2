package headstore

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/retry"
)

// Follower keeps one replica's Window in step with a chain's Store: it
// loads a snapshot, then applies every event after it in order. Whenever
// the stream breaks (a disconnect, a Redis restart, events trimmed before
// this replica read them) it reloads the snapshot, so the window never has
// a gap and never applies an event twice.
type Follower struct {
	chain string
	store Store
	w     *Window
	log   *slog.Logger
	// resyncs is resolved once, as the window's series are: a count
	// after the chain's series were deleted (Metrics.DropChain) never
	// writes them again.
	resyncs prometheus.Counter
}

// NewFollower returns a follower of store into w. It does no I/O.
func NewFollower(chain string, store Store, w *Window, log *slog.Logger, m *Metrics) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	f := &Follower{chain: chain, store: store, w: w, log: log.With("chain", chain),
		resyncs: m.resyncs.WithLabelValues(chain)}
	m.watch(chain, w)
	lag := m.lag.WithLabelValues(chain)
	prop := m.propagation.WithLabelValues(chain)
	w.onApply = func(ev *Event, _ int) {
		if ev.Time > 0 {
			d := time.Since(time.Unix(0, ev.Time)).Seconds()
			lag.Set(d)
			prop.Observe(d)
		}
	}
	return f
}

// Window is the window the follower keeps.
func (f *Follower) Window() *Window { return f.w }

// Run follows until ctx ends: the events into the window, and, when the
// store carries them, the headers announced ahead of their blocks
// (header.go).
func (f *Follower) Run(ctx context.Context) {
	if hs, ok := f.store.(HeaderStore); ok {
		done := make(chan struct{})
		go func() { defer close(done); f.headers(ctx, hs) }()
		defer func() { <-done }()
	}
	backoff := 50 * time.Millisecond
	reload := true
	for ctx.Err() == nil {
		err := f.once(ctx, reload)
		if ctx.Err() != nil {
			return
		}
		// Until it follows again the window may miss heads and reorgs.
		f.w.SetLive(false)
		reload = errors.Is(err, ErrGap) || errors.Is(err, errOutOfOrder)
		switch {
		case reload:
			f.log.Info("head feed broke; reloading the window", "err", err)
			backoff = 50 * time.Millisecond
		default:
			f.log.Warn("head feed unavailable", "err", err, "retry_in", backoff)
		}
		// Jittered, so replicas that lost Redis together don't all reload
		// the snapshot at the same instant when it returns.
		if !retry.Sleep(ctx, jittered(backoff)) {
			return
		}
		backoff = retry.Double(backoff, 0, 2*time.Second)
	}
}

// once loads the snapshot, unless the window is already in the store's
// history and behind it (after a disconnect it resumes from its own
// sequence number: no reload), and follows from there.
func (f *Follower) once(ctx context.Context, reload bool) error {
	snap, err := f.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	gen, seq := f.w.Seq()
	if reload || gen != snap.Gen || seq > snap.Seq {
		if err := f.w.Reset(snap); err != nil {
			return err
		}
		f.resyncs.Inc()
		f.log.Debug("window loaded", "seq", snap.Seq, "blocks", len(snap.Blocks))
	}
	gen, seq = f.w.Seq()
	f.w.SetLive(true)
	return f.store.Follow(ctx, gen, seq, f.w.Apply)
}

// Metrics are the head feed's metrics on one replica.
type Metrics struct {
	lag         *prometheus.GaugeVec
	propagation *prometheus.HistogramVec
	resyncs     *prometheus.CounterVec

	mu       sync.Mutex
	windows  map[string]*Window
	ageDesc  *prometheus.Desc
	headDesc *prometheus.Desc
	upDesc   *prometheus.Desc
}

// NewMetrics registers the head feed's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "head_follower_lag_seconds",
			Help: "How long after the leader published it this replica applied the last head event."}, []string{"chain"}),
		propagation: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "head_propagation_seconds",
			Help:    "Time from the leader publishing a head event to this replica serving it.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"chain"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "head_window_reloads_total",
			Help: "Times this replica reloaded a chain's whole window (start, Redis restart, a break in the feed)."}, []string{"chain"}),
		windows: map[string]*Window{},
		ageDesc: prometheus.NewDesc("venn_head_age_seconds",
			"Seconds since the timestamp of the head block this replica serves.", []string{"chain"}, nil),
		headDesc: prometheus.NewDesc("venn_head_number",
			"Head block number of this replica's window, per chain.", []string{"chain"}, nil),
		// With Redis, 0 says Redis is unreachable (or was restarted and
		// the window is reloading): the one Redis signal every replica
		// has, whether or not it leads or rate-limits.
		upDesc: prometheus.NewDesc("venn_head_feed_up",
			"1 while this replica's window follows the chain's head feed (Redis, or memory), 0 while the feed is lost.", []string{"chain"}, nil),
	}
	if reg != nil {
		reg.MustRegister(m.lag, m.propagation, m.resyncs, m)
	}
	return m
}

func (m *Metrics) watch(chain string, w *Window) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.windows[chain] = w
}

// DropChain deletes chain's series and stops reporting its window's head,
// once its follower has stopped for good (a reload removed the chain): a
// follower of the chain built later reports its own.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.windows, chain)
	m.mu.Unlock()
	l := prometheus.Labels{"chain": chain}
	m.lag.DeletePartialMatch(l)
	m.propagation.DeletePartialMatch(l)
	m.resyncs.DeletePartialMatch(l)
}

// Describe implements prometheus.Collector for the window's head number
// and age, and whether it follows the feed.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.ageDesc
	ch <- m.headDesc
	ch <- m.upDesc
}

// Collect implements prometheus.Collector: the head is read at scrape time,
// so its age keeps growing while it is stuck.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for chain, w := range m.windows {
		up := 0.0
		if w.live.Load() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.upDesc, prometheus.GaugeValue, up, chain)
		n, t, ok := w.headTime()
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.headDesc, prometheus.GaugeValue, float64(n), chain)
		ch <- prometheus.MustNewConstMetric(m.ageDesc, prometheus.GaugeValue,
			now.Sub(time.Unix(int64(t), 0)).Seconds(), chain)
	}
}

// headers hands the headers hs announces to the window until ctx ends,
// following again after each break.
func (f *Follower) headers(ctx context.Context, hs HeaderStore) {
	backoff := 50 * time.Millisecond
	for {
		start := time.Now()
		err := hs.FollowHeaders(ctx, f.w.Announce)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			backoff = 50 * time.Millisecond
		}
		f.log.Debug("header feed broke; following again", "err", err, "retry_in", backoff)
		if !retry.Sleep(ctx, jittered(backoff)) {
			return
		}
		backoff = retry.Double(backoff, 0, 2*time.Second)
	}
}

// jittered is a wait of d/2 to d.
func jittered(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

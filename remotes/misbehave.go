package remotes

// Misbehaviour: a remote that served data the pool could not trust (it
// disagreed with an accepted consensus answer, or its data failed an
// integrity check) is logged, counted, written to the chain's misbehaviour
// log if one is configured, and punished: its score drops, and after
// Cordon.Strikes misbehaviours within Cordon.Within it is cordoned, out of
// rotation for Cordon.Period. Its head is still polled meanwhile (the probe
// traffic that keeps its state current), and when the period ends it comes
// back on its own. A cordon never takes the chain's last remote in rotation.
//
// Other parts of the pool report misbehaviour through Pool.misbehaved.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kinds of misbehaviour: the kind label of venn_remote_misbehaviour_total
// and of misbehaviour log lines.
const (
	// kindDisagree: an answer that differs from the one a quorum accepted.
	kindDisagree = "disagree"
	// kindDisagreeTip: the same about a block within max_lag of the head,
	// where honest remotes can be on different forks for a moment. Logged
	// and counted, but not punished.
	kindDisagreeTip = "disagree_tip"
	// kindIntegrity: data that fails a local check (a block hash that is not
	// the hash of its header, a root that does not match its list).
	kindIntegrity = "integrity"
	// kindBogusHead: a head far beyond what the block time allows that no
	// other remote confirms (chainhead.go).
	kindBogusHead = "bogus_head"
)

// kindLabel bounds the label set: kinds come from code, but a typo must
// not grow it.
func kindLabel(kind string) string {
	switch kind {
	case kindDisagree, kindDisagreeTip, kindIntegrity, kindBogusHead:
		return kind
	}
	return "other"
}

// Defaults of misbehaviour handling.
const (
	DefaultCordonStrikes = 3
	DefaultCordonWithin  = time.Minute
	DefaultCordonPeriod  = 5 * time.Minute
)

// Bounds of what one misbehaviour records: details are short digests, never
// params or results.
const (
	maxMisbehaviourDetail = 256
	maxMisbehaviourMethod = 64
	misbehaviourLogQueue  = 1024
	// misbehaviourWarnEvery spaces the warnings about one remote; the ones
	// in between go to debug (the counter and the file get every one).
	misbehaviourWarnEvery = 10 * time.Second
)

// misbehaviourState is a remote's part: its cordon and recent strikes.
type misbehaviourState struct {
	cordonedUntil atomic.Int64 // unix nanos; 0: not cordoned
	// suspectUntil (unix nanos): a check passed before it is not a good
	// check (distrust.go): within cordon.within of a misbehaviour, or
	// while cordoned for it.
	suspectUntil atomic.Int64
	warnedAt     atomic.Int64 // unix nanos of the last warning
	// count is every punished misbehaviour: the score's signal.
	count atomic.Int64

	strikes []int64 // unix nanos within the window, guarded by Pool.cons.mu

	cordonedGauge prometheus.Gauge // nil for a remote built outside NewPool
	cordons       prometheus.Counter
}

// cordoned reports whether the remote is out of rotation for misbehaviour
// (available's outCordoned). It only reads: endCordons notes the end.
func (r *Remote) cordoned(now time.Time) bool { return now.UnixNano() < r.mb.cordonedUntil.Load() }

// endCordons notes each misbehaviour cordon over by now, once: the log
// line and venn_remote_cordoned. Rescoring calls it every interval, so
// the predicates (cordoned, available) never write.
func (p *Pool) endCordons(now time.Time) {
	for _, r := range p.members() {
		until := r.mb.cordonedUntil.Load()
		if until == 0 || now.UnixNano() < until || !r.mb.cordonedUntil.CompareAndSwap(until, 0) {
			continue
		}
		if r.log != nil {
			r.log.Info("remote back in rotation: cordon over")
		}
		r.syncCordonGauge(now)
	}
}

// misbehaviourMetrics are the series of votes and misbehaviour.
type misbehaviourMetrics struct {
	misbehaviour *prometheus.CounterVec // chain, remote, kind
	cordons      *prometheus.CounterVec // chain, remote
	cordoned     *prometheus.GaugeVec   // chain, remote
	consensus    *prometheus.CounterVec // chain, method, outcome
	logDropped   *prometheus.CounterVec // chain
}

func newMisbehaviourMetrics(reg prometheus.Registerer) *misbehaviourMetrics {
	cr := []string{"chain", "remote"}
	m := &misbehaviourMetrics{
		misbehaviour: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "misbehaviour_total",
			Help: "Misbehaviours of a remote: disagree (with a consensus answer), disagree_tip (the same near the head, not punished), integrity (failed a local check), bogus_head (a head nothing corroborates)."},
			[]string{"chain", "remote", "kind"}),
		cordons: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "cordons_total",
			Help: "Times a remote was cordoned (out of rotation) for repeated misbehaviour."}, cr),
		cordoned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "cordoned",
			Help: "1 while a remote is cordoned: by hand (the admin API) or for repeated misbehaviour."}, cr),
		consensus: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "consensus_total",
			Help: "Calls put to a vote, by outcome: agreed, resolved (no quorum, answered by on_dispute), disputed (no quorum, -32058), no_answer."},
			[]string{"chain", "method", "outcome"}),
		logDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "misbehaviour_log_dropped_total",
			Help: "Misbehaviour log lines dropped: the writer was behind or the file could not be written."}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.misbehaviour, m.cordons, m.cordoned, m.consensus, m.logDropped)
	}
	return m
}

// consensusState is the pool's part of votes and misbehaviour.
type consensusState struct {
	chain string
	m     *misbehaviourMetrics
	file  *misbehaviourLog // nil: no file

	mu sync.Mutex // strikes and cordon decisions: rare, and must not race to cordon every remote
}

func (c *consensusState) outcome(method, outcome string) {
	c.m.consensus.WithLabelValues(c.chain, method, outcome).Inc()
}

// initConsensus prepares misbehaviour handling; the vote rules are
// compiled with the rest of the settings (reconfig.go). It does no I/O:
// Start opens the log file.
func (p *Pool) initConsensus(m *Metrics) {
	mm := m.mb
	if mm == nil {
		mm = newMisbehaviourMetrics(nil)
	}
	cfg := p.conf()
	c := &p.cons
	c.chain, c.m = cfg.Chain, mm
	if cfg.MisbehaviourLog != "" {
		c.file = &misbehaviourLog{path: cfg.MisbehaviourLog, open: openAppend, log: p.log,
			dropped: mm.logDropped.WithLabelValues(cfg.Chain), queue: misbehaviourLogQueue}
	}
}

// initMisbehaviour gives a new remote its cordon series.
func (r *Remote) initMisbehaviour(m *Metrics) {
	mm := m.mb
	if mm == nil {
		return
	}
	r.mb.cordonedGauge = mm.cordoned.WithLabelValues(r.chain, r.Name())
	r.mb.cordons = mm.cordons.WithLabelValues(r.chain, r.Name())
	r.mb.cordonedGauge.Set(0)
}

// misbehaved records that r served data the pool could not trust: kind is
// one of the kind constants, method the call, detail a short description
// (digests, a failed check's name; never params, results or URLs). It logs,
// counts and writes the event, and punishes r unless the kind is not
// evidence (disagree_tip). Safe for concurrent use; it does not block.
func (p *Pool) misbehaved(r *Remote, kind, method, detail string) {
	now := p.now()
	label := kindLabel(kind)
	if len(method) > maxMisbehaviourMethod {
		method = method[:maxMisbehaviourMethod]
	}
	if len(detail) > maxMisbehaviourDetail {
		detail = detail[:maxMisbehaviourDetail]
	}
	p.cons.m.misbehaviour.WithLabelValues(p.conf().Chain, r.Name(), label).Inc()

	level := slog.LevelDebug
	last := r.mb.warnedAt.Load()
	if label != kindDisagreeTip && now.UnixNano()-last >= int64(misbehaviourWarnEvery) && r.mb.warnedAt.CompareAndSwap(last, now.UnixNano()) {
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "remote misbehaved", "remote", r.Name(), "kind", label, "method", method, "detail", detail)

	if f := p.cons.file; f != nil {
		line, err := json.Marshal(misbehaviourEvent{Time: now.UTC(), Chain: p.conf().Chain, Remote: r.Name(),
			Method: method, Kind: label, Detail: detail})
		if err == nil {
			f.write(append(line, '\n'))
		}
	}
	if label == kindDisagreeTip {
		return
	}
	r.mb.count.Add(1)
	cc := p.conf().Cordon
	if r.suspect(now, now.Add(cc.Within)) {
		// The first finding since its last good check: its answers
		// since are dropped now; later ones within the episode are
		// dropped by the cordon, if it comes.
		p.distrusted(r, label)
	}
	if until, ok := p.strike(r, now); ok {
		r.suspect(now, until)
		p.distrusted(r, DistrustCordoned)
	}
}

// strike counts one misbehaviour against r and cordons it at the limit:
// then it reports until when.
func (p *Pool) strike(r *Remote, now time.Time) (until time.Time, cordoned bool) {
	c := &p.cons
	cc := p.conf().Cordon
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := now.Add(-cc.Within).UnixNano()
	kept := r.mb.strikes[:0]
	for _, t := range r.mb.strikes {
		if t > cut {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now.UnixNano())
	if len(kept) < cc.Strikes {
		r.mb.strikes = kept
		return time.Time{}, false
	}
	r.mb.strikes = kept[:0]
	for _, o := range p.members() {
		if o != r && o.available(now)&^outBusy == 0 {
			r.mb.cordonedUntil.Store(now.Add(cc.Period).UnixNano())
			if r.mb.cordons != nil {
				r.mb.cordons.Inc()
			}
			r.syncCordonGauge(now)
			r.log.Warn("remote cordoned: out of rotation after repeated misbehaviour",
				"strikes", cc.Strikes, "within", cc.Within, "for", cc.Period)
			return now.Add(cc.Period), true
		}
	}
	r.log.Error("remote keeps misbehaving but is the last in rotation: not cordoned",
		"strikes", cc.Strikes, "within", cc.Within)
	return time.Time{}, false
}

// misbehaviourEvent is one line of the misbehaviour log.
type misbehaviourEvent struct {
	Time   time.Time `json:"time"`
	Chain  string    `json:"chain"`
	Remote string    `json:"remote"`
	Method string    `json:"method"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail,omitempty"`
}

// misbehaviourLog appends JSON lines to a file. Writes never block a call:
// lines go through a bounded queue to one writer goroutine, and a line that
// finds the queue full is dropped and counted. Each line is one write to a
// file opened for appending, so chains may share the file.
type misbehaviourLog struct {
	path    string
	open    func(path string) (io.WriteCloser, error)
	log     *slog.Logger
	dropped prometheus.Counter
	queue   int

	mu   sync.RWMutex
	q    chan []byte // nil before start and after stop
	done chan struct{}
}

func openAppend(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
}

// start opens the file and starts the writer; stop ends it.
func (l *misbehaviourLog) start() error {
	if l == nil {
		return nil
	}
	w, err := l.open(l.path)
	if err != nil {
		return fmt.Errorf("misbehaviour log: %w", err)
	}
	q, done := make(chan []byte, l.queue), make(chan struct{})
	l.mu.Lock()
	l.q, l.done = q, done
	l.mu.Unlock()
	go l.run(w, q, done)
	return nil
}

func (l *misbehaviourLog) run(w io.WriteCloser, q <-chan []byte, done chan<- struct{}) {
	defer close(done)
	defer func() {
		if err := w.Close(); err != nil {
			l.log.Warn("misbehaviour log: close", "err", err)
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			l.log.Error("misbehaviour log writer panicked; no more lines are written", "panic", v)
		}
	}()
	var warned time.Time
	for line := range q {
		if _, err := w.Write(line); err != nil {
			l.dropped.Inc()
			if time.Since(warned) > time.Minute {
				warned = time.Now()
				l.log.Warn("misbehaviour log: write failed; lines are dropped", "err", err)
			}
		}
	}
}

// write queues one line, or drops it when the writer is behind or stopped.
func (l *misbehaviourLog) write(line []byte) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.q == nil {
		l.dropped.Inc()
		return
	}
	select {
	case l.q <- line:
	default:
		l.dropped.Inc()
	}
}

// stop writes what is queued, closes the file and waits for the writer, at
// most until ctx ends.
func (l *misbehaviourLog) stop(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	q, done := l.q, l.done
	l.q = nil
	l.mu.Unlock()
	if q == nil {
		return nil
	}
	close(q)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("misbehaviour log: %w", ctx.Err())
	}
}

package remotes

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/misbehave"
	"github.com/venn-gateway/venn/remotes/side"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/verified"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Metrics are the remotes' Prometheus series. Label values are bounded:
// chain and remote names come from config, codes from a known set.
type Metrics struct {
	calls     *prometheus.CounterVec   // chain, remote, outcome
	latency   *prometheus.HistogramVec // chain, remote
	errors    *prometheus.CounterVec   // chain, remote, code, http_status
	failures  *prometheus.CounterVec   // chain, remote, class, reason
	head      *prometheus.GaugeVec     // chain, remote
	lag       *prometheus.GaugeVec     // chain, remote
	healthy   *prometheus.GaugeVec     // chain, remote
	breaker   *prometheus.GaugeVec     // chain, remote
	inFlight  *prometheus.GaugeVec     // chain, remote
	throttled *prometheus.CounterVec   // chain, remote
	oldest    *prometheus.GaugeVec     // chain, remote, kind (avail.go)
	chainHead *prometheus.GaugeVec     // chain
	blockTime *prometheus.GaugeVec     // chain
	splits    *prometheus.CounterVec   // chain
	shared    *prometheus.CounterVec   // chain
	attempts  *prometheus.HistogramVec // chain
	mb        *misbehave.Metrics       // remotes/misbehave
	hs        *hedgeScoreMetrics       // hedge.go, score.go
	ig        *verified.Metrics        // remotes/verified
	cc        *chainCheckMetrics       // chaincheck.go
	bm        *budget.Metrics          // remotes/budget
	sd        *side.Metrics            // remotes/side
	held      seriesHolders            // series.go: who writes each remote's and chain's series

	// The reply budget (replies.go): one series each, summed over the
	// budgets given these metrics.
	replyBytes           prometheus.Gauge
	replyBudgetExhausted prometheus.Counter
}

// NewMetrics registers the remotes' series on reg; a nil reg registers
// nothing (the series still work).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	cr := []string{"chain", "remote"}
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "calls_total",
			Help: "Calls sent to a remote, by outcome (ok or the error class)."}, []string{"chain", "remote", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Subsystem: "remote", Name: "call_duration_seconds",
			Help: "Latency of calls to a remote.", Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, cr),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "errors_total",
			Help: "Errors from a remote by JSON-RPC code and HTTP status (0 when not applicable)."}, []string{"chain", "remote", "code", "http_status"}),
		// The verdict's class and reason, each from a fixed set: what the
		// dashboard breaks errors down by, where code and status say
		// little (a -32000 is a dozen things).
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "failures_total",
			Help: "Failed calls to a remote by class (caller, retry, throttled, too_large) and reason (timeout, http_5xx, header_not_found, ...)."},
			[]string{"chain", "remote", "class", "reason"}),
		head: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "head",
			Help: "Latest block number a remote reported."}, cr),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "lag_blocks",
			Help: "Blocks a remote is behind the chain's best head."}, cr),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "healthy",
			Help: "1 when a remote is in rotation (right chain, breaker not open, not lagging)."}, cr),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "breaker_state",
			Help: "Breaker state: 0 closed, 1 half-open (probing), 2 open."}, cr),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "in_flight",
			Help: "Calls in flight to a remote."}, cr),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "throttled_total",
			Help: "Calls not sent or refused because of a rate limit (ours or the remote's)."}, cr),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "oldest_block",
			Help: "Oldest block of each kind of data (state, blocks, logs, traces) the remote is taken to serve; 0: every block, or not known."},
			[]string{"chain", "remote", "kind"}),
		chainHead: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "chain_head",
			Help: "Best head of a chain across its remotes."}, []string{"chain"}),
		// Alerts judge the head's age in block times: a fixed threshold
		// is wrong for all but one chain.
		blockTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "block_time_seconds",
			Help: "A chain's block time: block_time from config, else learned from block timestamps, else the default."}, []string{"chain"}),
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "getlogs_splits_total",
			Help: "eth_getLogs requests split into parts."}, []string{"chain"}),
		shared: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "dedup_shared_total",
			Help: "Calls answered by an identical call already in flight."}, []string{"chain"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "call_attempts",
			Help: "Remotes tried per client call.", Buckets: []float64{1, 2, 3, 4, 6, 8}}, []string{"chain"}),
		replyBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "reply_bytes_in_flight",
			Help: "Bytes of remotes' replies being read, against limits.max_reply_bytes_in_flight."}),
		replyBudgetExhausted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "reply_budget_exhausted_total",
			Help: "Replies left unread because the reply budget stayed full for longer than a reply may wait."}),
	}
	m.mb = misbehave.NewMetrics(reg)
	m.hs = newHedgeScoreMetrics(reg)
	m.ig = verified.NewMetrics(reg)
	m.cc = newChainCheckMetrics(reg)
	m.bm = budget.NewMetrics(reg)
	m.sd = side.NewMetrics(reg)
	if reg != nil {
		reg.MustRegister(m.calls, m.latency, m.errors, m.failures, m.head, m.lag, m.healthy, m.breaker,
			m.inFlight, m.throttled, m.oldest, m.chainHead, m.blockTime, m.splits, m.shared, m.attempts,
			m.replyBytes, m.replyBudgetExhausted)
	}
	return m
}

// remoteMetrics are one remote's series, resolved once so the hot path does
// no label lookups.
type remoteMetrics struct {
	m             *Metrics
	chain, remote string
	ok            prometheus.Counter
	latency       prometheus.Observer
	head, lag     prometheus.Gauge
	healthy       prometheus.Gauge
	breaker       prometheus.Gauge
	inFlight      prometheus.Gauge
	throttled     prometheus.Counter
	oldest        [numKinds]prometheus.Gauge // by DataKind; KindNone unused
	// released: the remote left and let go of its series (release). A
	// call that was still in flight then counts its failure nowhere:
	// failures resolve their series per call, and would write a deleted
	// remote's again, for good. release takes mu to set it, so a failure
	// resolving its series under the read lock is done before the series
	// are deleted.
	mu       sync.RWMutex
	released bool
}

// forRemote counts the caller in as a holder of the series (series.go):
// it lets go with release.
func (m *Metrics) forRemote(chain, remote string) *remoteMetrics {
	m.holdRemote(chain, remote)
	rm := &remoteMetrics{
		m: m, chain: chain, remote: remote,
		ok:        m.calls.WithLabelValues(chain, remote, "ok"),
		latency:   m.latency.WithLabelValues(chain, remote),
		head:      m.head.WithLabelValues(chain, remote),
		lag:       m.lag.WithLabelValues(chain, remote),
		healthy:   m.healthy.WithLabelValues(chain, remote),
		breaker:   m.breaker.WithLabelValues(chain, remote),
		inFlight:  m.inFlight.WithLabelValues(chain, remote),
		throttled: m.throttled.WithLabelValues(chain, remote),
	}
	for _, k := range DataKinds {
		rm.oldest[k] = m.oldest.WithLabelValues(chain, remote, k.String())
	}
	return rm
}

// release lets go of the remote's series, once it has left (retire) or
// never served (discard).
func (rm *remoteMetrics) release() {
	rm.mu.Lock()
	rm.released = true
	rm.mu.Unlock()
	rm.m.releaseRemote(rm.chain, rm.remote)
}

func (rm *remoteMetrics) failed(v verdict.Verdict, code, status int) {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	if rm.released {
		return
	}
	rm.m.calls.WithLabelValues(rm.chain, rm.remote, v.Class.String()).Inc()
	rm.m.errors.WithLabelValues(rm.chain, rm.remote, codeLabel(code), statusLabel(status)).Inc()
	rm.m.failures.WithLabelValues(rm.chain, rm.remote, v.Class.String(), string(v.Reason)).Inc()
}

// codeLabel bounds an upstream's JSON-RPC code: a hostile or buggy remote
// must not grow the label space. The standard codes, the server range
// -32099..-32000 where providers put their own, and the few codes nodes send
// outside it (3 execution reverted, 429 and 4444 from gateways) keep their
// value; anything else is "other".
func codeLabel(code int) string {
	switch {
	case code == 0:
		return "0"
	case code >= -32099 && code <= -32000, code >= -32603 && code <= -32600,
		code == -32700, code == 3, code == 429, code == 4444:
		return strconv.Itoa(code)
	}
	return "other"
}

// statusLabel keeps the HTTP statuses that change what venn does and folds
// the rest into their class.
func statusLabel(status int) string {
	switch status {
	case 0:
		return "0"
	case 400, 401, 403, 404, 405, 408, 413, 429, 500, 502, 503, 504:
		return strconv.Itoa(status)
	}
	if status >= 100 && status <= 599 {
		return strconv.Itoa(status/100) + "xx"
	}
	return "other"
}

// NewReplyBudget is wire.NewReplyBudget counted in m's series
// (reply_bytes_in_flight, reply_budget_exhausted_total); m may be nil.
func NewReplyBudget(size int64, m *Metrics) *wire.ReplyBudget {
	if m == nil {
		m = NewMetrics(nil)
	}
	return wire.NewReplyBudget(size, m.replyBytes, m.replyBudgetExhausted)
}

// chainCheckMetrics are the chain checks' series.
type chainCheckMetrics struct {
	checks *prometheus.CounterVec // chain, remote, outcome
	wrong  *prometheus.GaugeVec   // chain, remote
}

func newChainCheckMetrics(reg prometheus.Registerer) *chainCheckMetrics {
	m := &chainCheckMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "chain_checks_total",
			Help: "eth_chainId checks of a remote, by outcome: ok, wrong (another chain: out of rotation), failed (no usable answer)."},
			[]string{"chain", "remote", "outcome"}),
		wrong: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "wrong_chain",
			Help: "1 while a remote's last chain id check found it on another chain."}, []string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.checks, m.wrong)
	}
	return m
}

// hedgeScoreMetrics are the series of hedging and scoring.
type hedgeScoreMetrics struct {
	hedges *prometheus.CounterVec // chain, outcome
	score  *prometheus.GaugeVec   // chain, remote
}

func newHedgeScoreMetrics(reg prometheus.Registerer) *hedgeScoreMetrics {
	m := &hedgeScoreMetrics{
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "hedges_total",
			Help: "Hedged attempts by outcome: won (its answer was used), lost (another answered first, or none answered well), skipped_budget (no token in the chain's hedge budget), skipped_no_remote (no other remote could take it before the first attempt returned)."},
			[]string{"chain", "outcome"}),
		score: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "score",
			Help: "A remote's routing score, about its effective latency in ms; lower is better."}, []string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.hedges, m.score)
	}
	return m
}

package remotes

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Why a remote is out of rotation (or about to be): the codes of
// OutReason, one per condition selection checks (select.go's candidate
// filter and Remote.available).
const (
	OutChainUnverified = "chain_unverified"    // its chain id is not checked yet, or the check fails
	OutWrongChain      = "wrong_chain"         // it serves another chain
	OutBreakerOpen     = "breaker_open"        // consecutive faults; a probe after the cooldown
	OutBreakerProbing  = "breaker_probing"     // half open: its one probe call is out
	OutNoHead          = "no_head"             // no head reported yet
	OutHeadAhead       = "head_ahead_of_clock" // its head is stamped ahead of this host's clock: not followed
	OutHeadHeld        = "head_uncorroborated" // nothing corroborates its head yet: not followed
	OutLagging         = "lagging"             // more than max_lag behind the best head
	OutThrottled       = "throttled"           // it answered 429: backed off
	OutRateLimit       = "rate_limit"          // at its configured rps
	OutFull            = "full"                // at its max_in_flight
	OutCordoned        = "cordoned"            // cordoned by hand (admin API)
	OutMisbehaviour    = "misbehaviour"        // cordoned after repeated misbehaviour
)

// OutReason is one reason a remote is out of rotation. Text says it for
// people ("lagging 12 blocks"); Until is when it ends by itself, if known.
type OutReason struct {
	Code  string    `json:"code"`
	Text  string    `json:"text"`
	Until time.Time `json:"until,omitzero"`
}

// ScoreTerms are the inputs of a remote's score (score.go), as of now.
type ScoreTerms struct {
	LatencyMS     float64 `json:"latency_ms"` // mean of p50 and p90; 0: not known yet
	ErrorShare    float64 `json:"error_share"`
	ThrottleShare float64 `json:"throttle_share"`
	LagAvg        float64 `json:"lag_avg_blocks"`
	Misbehaviour  float64 `json:"misbehaviour"`
}

// RemoteStatus is one remote as the pool sees it now, for the admin API
// and status output. It holds no URL or header: Name is how a remote is
// shown, and LastError is redacted.
type RemoteStatus struct {
	Name       string      `json:"name"`
	Tier       string      `json:"tier"`
	InRotation bool        `json:"in_rotation"`
	Out        []OutReason `json:"out,omitempty"` // empty when in rotation
	Preferred  bool        `json:"preferred"`     // in its tier's preferred set (score.go)
	Head       uint64      `json:"head"`
	Lag        uint64      `json:"lag"`
	P50MS      float64     `json:"latency_p50_ms"` // 0: too few samples
	P90MS      float64     `json:"latency_p90_ms"`
	Score      float64     `json:"score"` // lower is better
	Terms      ScoreTerms  `json:"score_terms"`
	InFlight   int64       `json:"in_flight"`
	// Weight is the configured weight (absent: 1); BudgetUsed the share of
	// its budget used this period, as this replica knows it (absent: no
	// budget).
	Weight     *float64 `json:"weight,omitempty"`
	BudgetUsed *float64 `json:"budget_used,omitempty"`
	// Cordon is the operator's cordon, applied or held back because the
	// remote is the chain's last in rotation (CordonHeld).
	Cordon     *ManualCordon `json:"cordon,omitempty"`
	CordonHeld bool          `json:"cordon_held,omitempty"`
	// Availability is the oldest block of each kind of data the remote is
	// taken to serve (avail.go).
	Availability []Availability `json:"availability"`
	LastError    string         `json:"last_error,omitempty"`
	// LastFailure is the last fault's kind: dns, refused, tls, timeout,
	// ... (wire.FailureKind), or a verdict.Classify reason (unauthorized, http_5xx).
	LastFailure string    `json:"last_failure,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// lastError is a remote's last fault, redacted and cut short.
type lastError struct {
	text string
	kind string // failure.go
	at   time.Time
}

// maxLastError bounds the last error kept: a status line, not a dump.
const maxLastError = 200

// failureKind names what err, a remote's fault, was.
func failureKind(err error) string {
	if err == nil {
		return ""
	}
	if k := wire.FailureKind(err); k != "" {
		return k
	}
	return string(verdict.Classify("", err).Reason)
}

// noteError keeps err as the remote's last fault: redacted, without IP
// addresses, cut short, and its kind.
func (r *Remote) noteError(err error) {
	text := wire.MaskAddrs(strings.ToValidUTF8(r.red.Redact(err.Error()), ""))
	if len(text) > maxLastError {
		text = strings.ToValidUTF8(text[:maxLastError], "") + "…"
	}
	r.last.Store(&lastError{text: text, kind: failureKind(err), at: r.now()})
}

// Status reports every remote of the chain, in routing order: the one
// read of the pool's state besides its head (ReasonsOf, InFlight and
// Names read it).
func (p *Pool) Status() []RemoteStatus {
	now := p.now()
	best := p.healthyBest(now)
	cfg, members := p.conf(), p.members()
	w := cfg.Scoring.weights()
	out := make([]RemoteStatus, len(members))
	for i, r := range members {
		s := RemoteStatus{Name: r.Name(), Tier: r.Tier().String(), Preferred: r.Preferred(), Head: r.Head(),
			Score: r.score(), InFlight: r.inFlight.Load()}
		if s.Head < best {
			s.Lag = best - s.Head
		}
		var q [len(scoreQuantiles)]time.Duration
		if r.lat.quantiles(scoreQuantiles[:], q[:]) {
			s.P50MS, s.P90MS = ms(q[0]), ms(q[1])
			s.Terms.LatencyMS = (s.P50MS + s.P90MS) / 2
		}
		s.Terms.ErrorShare = math.Float64frombits(r.errorEWMA.Load())
		s.Terms.ThrottleShare = math.Float64frombits(r.sc.throttles.Load())
		s.Terms.LagAvg = math.Float64frombits(r.sc.lagAvg.Load())
		if w.Misbehaviour != 0 {
			s.Terms.Misbehaviour = r.misbehaviour(now)
		}
		if m := r.manual.Load(); m != nil {
			c := m.ManualCordon
			s.Cordon, s.CordonHeld = &c, !m.applied
		}
		if le := r.last.Load(); le != nil {
			s.LastError, s.LastFailure, s.LastErrorAt = le.text, le.kind, le.at
		}
		s.Availability = r.availabilityOf()
		s.Weight = r.cfg.Weight
		if r.bud != nil {
			u := r.bud.Used()
			s.BudgetUsed = &u
		}
		s.Out = p.outReasons(r, now, best)
		s.InRotation = len(s.Out) == 0
		out[i] = s
	}
	return out
}

// outReasons lists every reason r is out of rotation at now: each check
// of Remote.available and the candidate filter, in that order.
func (p *Pool) outReasons(r *Remote, now time.Time, best uint64) []OutReason {
	var out []OutReason
	add := func(code, text string, until time.Time) { out = append(out, OutReason{code, text, until}) }
	switch r.chainState.Load() {
	case chainWrong:
		add(OutWrongChain, "serves another chain", time.Time{})
	case chainUnknown:
		add(OutChainUnverified, "chain id not verified yet", time.Time{})
	}
	switch r.brk.state.Load() {
	case breakerOpen:
		until := time.Unix(0, r.brk.openedAt.Load()+r.brk.cooldown.Load())
		if now.Before(until) {
			add(OutBreakerOpen, "breaker open after consecutive faults", until)
		}
	case breakerHalfOpen:
		add(OutBreakerProbing, "breaker half open: probing", time.Time{})
	}
	if r.Head() == 0 {
		if held := p.heldReport(r); held == nil {
			add(OutNoHead, "no head reported yet", time.Time{})
		} else if ahead := int64(held.Time) - now.Unix(); ahead > int64(heads.MaxClockSkew/time.Second) {
			add(OutHeadAhead, fmt.Sprintf("head %d not followed: its timestamp is %d s ahead of this host's clock (more than %v)",
				held.Number, ahead, heads.MaxClockSkew), time.Time{})
		} else {
			add(OutHeadHeld, fmt.Sprintf("head %d not followed: nothing corroborates it yet", held.Number), time.Time{})
		}
	} else if p.lagging(r, best) {
		add(OutLagging, fmt.Sprintf("lagging %d blocks (max_lag %d)", best-r.Head(), p.conf().MaxLag), time.Time{})
	}
	if t := r.throttledTil.Load(); now.UnixNano() < t {
		add(OutThrottled, "rate-limited by the remote (429): backed off", time.Unix(0, t))
	}
	if r.lim != nil && r.lim.TokensAt(now) < 1 {
		add(OutRateLimit, fmt.Sprintf("at its rate limit (%g rps)", float64(r.lim.Limit())), time.Time{})
	}
	if mx := r.cfg.MaxInFlight; mx > 0 && r.inFlight.Load() >= int64(mx) {
		add(OutFull, fmt.Sprintf("at max_in_flight (%d)", mx), time.Time{})
	}
	if m := r.manual.Load(); m != nil && m.applied {
		add(OutCordoned, cordonText(m.ManualCordon), m.Until)
	}
	if until := r.mb.cordonedUntil.Load(); now.UnixNano() < until {
		add(OutMisbehaviour, "cordoned after repeated misbehaviour", time.Unix(0, until))
	}
	return out
}

// heldReport is the head r reports that nothing corroborated (judgeHead),
// nil when none is held.
func (p *Pool) heldReport(r *Remote) *heads.Report {
	p.heads.mu.Lock()
	defer p.heads.mu.Unlock()
	return r.ht.held
}

func cordonText(c ManualCordon) string {
	s := "cordoned by " + c.By
	if !c.Until.IsZero() {
		s += " until " + c.Until.UTC().Format(time.RFC3339)
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// RemoteReason is one remote of a chain as a caller told "no remote" sees
// it: whether it is in rotation, each reason it is out (OutReason codes),
// and what it last failed with (failure.go: dns, refused, tls,
// wrong_chain, ...) and when. It names the remote, never its URL, and its
// text is redacted: -32050's data, /readyz and the subcommands that wait
// for a remote show it as is.
type RemoteReason struct {
	Remote      string    `json:"remote"`
	InRotation  bool      `json:"in_rotation"`
	Out         []string  `json:"out,omitempty"`
	LastFailure string    `json:"last_failure,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// ReasonsOf is the reasons of st, a Status read: remote by remote, why
// each is in rotation or not and what it last failed with.
func ReasonsOf(st []RemoteStatus) []RemoteReason {
	out := make([]RemoteReason, len(st))
	for i, s := range st {
		rr := RemoteReason{Remote: s.Name, InRotation: s.InRotation,
			LastFailure: s.LastFailure, LastError: s.LastError, LastErrorAt: s.LastErrorAt}
		for _, o := range s.Out {
			rr.Out = append(rr.Out, o.Code)
		}
		out[i] = rr
	}
	return out
}

// reasons is ReasonsOf(p.Status()) without what Status computes besides:
// no score, latency or availability, for the error of a call no remote
// served.
func (p *Pool) reasons() []RemoteReason {
	now := p.now()
	best := p.healthyBest(now)
	members := p.members()
	out := make([]RemoteReason, len(members))
	for i, r := range members {
		rr := RemoteReason{Remote: r.Name()}
		for _, o := range p.outReasons(r, now, best) {
			rr.Out = append(rr.Out, o.Code)
		}
		rr.InRotation = len(rr.Out) == 0
		if le := r.last.Load(); le != nil {
			rr.LastFailure, rr.LastError, rr.LastErrorAt = le.kind, le.text, le.at
		}
		out[i] = rr
	}
	return out
}

// InFlight is the calls being sent to the remotes of st, a Status read:
// a removed chain lets them finish before it stops.
func InFlight(st []RemoteStatus) int64 {
	var n int64
	for _, s := range st {
		n += s.InFlight
	}
	return n
}

// Names is the remotes of st, a Status read, in routing order.
func Names(st []RemoteStatus) []string {
	out := make([]string, len(st))
	for i, s := range st {
		out[i] = s.Name
	}
	return out
}

// ReasonsText says rs in one line, remote by remote: "alpha: chain_unverified,
// no_head; last dns (lookup eth.example.org: no such host); beta: in rotation".
func ReasonsText(rs []RemoteReason) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Remote + ": ")
		if r.InRotation {
			b.WriteString("in rotation")
		} else {
			b.WriteString(strings.Join(r.Out, ", "))
		}
		if r.LastFailure != "" {
			b.WriteString("; last " + r.LastFailure)
			if r.LastError != "" {
				b.WriteString(" (" + r.LastError + ")")
			}
		}
	}
	return b.String()
}

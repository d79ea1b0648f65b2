package status

import (
	"strings"
	"time"
)

// Why a remote is out of rotation (or about to be): the codes of
// OutReason, one per condition selection checks (remotes' candidate
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

// ScoreTerms are the inputs of a remote's score (remotes' score.go), as of now.
type ScoreTerms struct {
	LatencyMS     float64 `json:"latency_ms"` // mean of p50 and p90; 0: not known yet
	ErrorShare    float64 `json:"error_share"`
	ThrottleShare float64 `json:"throttle_share"`
	LagAvg        float64 `json:"lag_avg_blocks"`
	Misbehaviour  float64 `json:"misbehaviour"`
}

// Remote is one remote as the pool sees it now, for the admin API and
// status output. It holds no URL or header: Name is how a remote is
// shown, and LastError is redacted.
type Remote struct {
	Name       string      `json:"name"`
	Tier       string      `json:"tier"`
	InRotation bool        `json:"in_rotation"`
	Out        []OutReason `json:"out,omitempty"` // empty when in rotation
	Preferred  bool        `json:"preferred"`     // in its tier's preferred set
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
	Cordon     *Cordon `json:"cordon,omitempty"`
	CordonHeld bool    `json:"cordon_held,omitempty"`
	// Availability is the oldest block of each kind of data the remote is
	// taken to serve.
	Availability []Availability `json:"availability"`
	LastError    string         `json:"last_error,omitempty"`
	// LastFailure is the last fault's kind: dns, refused, tls, timeout,
	// ... (wire.FailureKind), or a verdict.Classify reason (unauthorized, http_5xx).
	LastFailure string    `json:"last_failure,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Availability is one remote's window for one kind of data, for status.
type Availability struct {
	Kind   string `json:"kind"`
	Oldest uint64 `json:"oldest_block"` // 0: every block (or not known)
	// Source says where it comes from: "config", "probe", "answers", or
	// "unknown" (nothing learnt yet: every block is tried).
	Source    string    `json:"source"`
	LearnedAt time.Time `json:"learned_at,omitzero"`
}

// Cordon is an operator's cordon of one remote.
type Cordon struct {
	Remote string    `json:"remote"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by"` // the admin token's name
	At     time.Time `json:"at"`
	Until  time.Time `json:"until,omitzero"` // zero: until uncordoned
}

// Active reports whether c holds at now.
func (c Cordon) Active(now time.Time) bool { return c.Until.IsZero() || now.Before(c.Until) }

// Text says c for people: by whom, until when, why.
func (c Cordon) Text() string {
	s := "cordoned by " + c.By
	if !c.Until.IsZero() {
		s += " until " + c.Until.UTC().Format(time.RFC3339)
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

// Reason is one remote of a chain as a caller told "no remote" sees
// it: whether it is in rotation, each reason it is out (OutReason codes),
// and what it last failed with (wire.FailureKind: dns, refused, tls,
// wrong_chain, ...) and when. It names the remote, never its URL, and its
// text is redacted: -32050's data, /readyz and the subcommands that wait
// for a remote show it as is.
type Reason struct {
	Remote      string    `json:"remote"`
	InRotation  bool      `json:"in_rotation"`
	Out         []string  `json:"out,omitempty"`
	LastFailure string    `json:"last_failure,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// ReasonsOf is the reasons of st, a Pool.Status read: remote by remote, why
// each is in rotation or not and what it last failed with.
func ReasonsOf(st []Remote) []Reason {
	out := make([]Reason, len(st))
	for i, s := range st {
		rr := Reason{Remote: s.Name, InRotation: s.InRotation,
			LastFailure: s.LastFailure, LastError: s.LastError, LastErrorAt: s.LastErrorAt}
		for _, o := range s.Out {
			rr.Out = append(rr.Out, o.Code)
		}
		out[i] = rr
	}
	return out
}

// InFlight is the calls being sent to the remotes of st, a Pool.Status read:
// a removed chain lets them finish before it stops.
func InFlight(st []Remote) int64 {
	var n int64
	for _, s := range st {
		n += s.InFlight
	}
	return n
}

// Names is the remotes of st, a Pool.Status read, in routing order.
func Names(st []Remote) []string {
	out := make([]string, len(st))
	for i, s := range st {
		out[i] = s.Name
	}
	return out
}

// Text says rs in one line, remote by remote: "alpha: chain_unverified,
// no_head; last dns (lookup eth.example.org: no such host); beta: in rotation".
func Text(rs []Reason) string {
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

package remotes

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/status"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// The status types are remotes/status's.
type (
	RemoteStatus = status.Remote
	RemoteReason = status.Reason
	OutReason    = status.OutReason
	Availability = status.Availability
	ManualCordon = status.Cordon
)

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
// read of the pool's state besides its head (status.ReasonsOf,
// status.InFlight and status.Names read it).
func (p *Pool) Status() []RemoteStatus {
	now := p.now()
	best := p.healthyBest(now)
	cfg, members := p.conf(), p.members()
	w := cfg.Scoring.Weights()
	out := make([]RemoteStatus, len(members))
	for i, r := range members {
		s := RemoteStatus{Name: r.Name(), Tier: r.Tier().String(), Preferred: r.Preferred(), Head: r.Head(),
			Score: r.score(), InFlight: r.inFlight.Load()}
		if s.Head < best {
			s.Lag = best - s.Head
		}
		var q [len(scoreQuantiles)]time.Duration
		if r.lat.Quantiles(scoreQuantiles[:], q[:]) {
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
	add := func(code, text string, until time.Time) {
		out = append(out, OutReason{Code: code, Text: text, Until: until})
	}
	switch r.cc.State() {
	case health.Wrong:
		add(status.OutWrongChain, "serves another chain", time.Time{})
	case health.Unknown:
		add(status.OutChainUnverified, "chain id not verified yet", time.Time{})
	}
	switch r.brk.State() {
	case breaker.Open:
		until := r.brk.ProbeAt()
		if now.Before(until) {
			add(status.OutBreakerOpen, "breaker open after consecutive faults", until)
		}
	case breaker.HalfOpen:
		add(status.OutBreakerProbing, "breaker half open: probing", time.Time{})
	}
	noHead := r.Head() == 0
	var held *heads.Report
	if noHead {
		var vouched *heads.Report
		vouched, held = p.reports(r)
		noHead = vouched == nil // head 0, vouched: the remote is at genesis
	}
	if noHead {
		if held == nil {
			add(status.OutNoHead, "no head reported yet", time.Time{})
		} else if ahead := int64(held.Time) - now.Unix(); ahead > int64(heads.MaxClockSkew/time.Second) {
			add(status.OutHeadAhead, fmt.Sprintf("head %d not followed: its timestamp is %d s ahead of this host's clock (more than %v)",
				held.Number, ahead, heads.MaxClockSkew), time.Time{})
		} else {
			add(status.OutHeadHeld, fmt.Sprintf("head %d not followed: nothing corroborates it yet", held.Number), time.Time{})
		}
	} else if p.lagging(r, best) {
		add(status.OutLagging, fmt.Sprintf("lagging %d blocks (max_lag %d)", best-r.Head(), p.conf().MaxLag), time.Time{})
	}
	if t := r.throttledTil.Load(); now.UnixNano() < t {
		add(status.OutThrottled, "rate-limited by the remote (429): backed off", time.Unix(0, t))
	}
	if r.lim != nil && r.lim.TokensAt(now) < 1 {
		add(status.OutRateLimit, fmt.Sprintf("at its rate limit (%g rps)", float64(r.lim.Limit())), time.Time{})
	}
	if mx := r.cfg.MaxInFlight; mx > 0 && r.inFlight.Load() >= int64(mx) {
		add(status.OutFull, fmt.Sprintf("at max_in_flight (%d)", mx), time.Time{})
	}
	if m := r.manual.Load(); m != nil && m.applied {
		add(status.OutCordoned, m.ManualCordon.Text(), m.Until)
	}
	if until := r.mb.cordonedUntil.Load(); now.UnixNano() < until {
		add(status.OutMisbehaviour, "cordoned after repeated misbehaviour", time.Unix(0, until))
	}
	return out
}

// reports are r's highest corroborated head (heads.Tracker), nil when
// none is, and the head it reports that nothing corroborated, nil when
// none is held.
func (p *Pool) reports(r *Remote) (vouched, held *heads.Report) {
	p.heads.t.Lock()
	defer p.heads.t.Unlock()
	return r.ht.Vouched, r.ht.Held
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// reasons is status.ReasonsOf(p.Status()) without what Status computes besides:
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

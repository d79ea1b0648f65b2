package remotes

// The chain's head as the pool believes it: each remote's reports judged
// and the chain's corroborated tip moved by heads.Tracker, which the pool
// hands its members as heads.Member.

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// Heads is a chain's head tracking, which its pool owns and hands out
// (Pool.Heads): the chain's tip, judged from every remote's reports; its
// block time (blocktime.go); the leader's poll plan (heads.Plan); the
// recent canonical hashes (tipchain.go); the cluster's head feed (feed.go);
// the stall watch (heads.Stalls); and the remotes' chain checks it asks for
// (chaincheck.go). It never sends a client's call.
type Heads struct {
	p *Pool

	// t is the chain's tip and block time; its lock guards each
	// remote's heads.Judgement, and its Retimed channel is closed also
	// when a remote's fed flag moves (feed.go).
	t          heads.Tracker
	pace       heads.Plan   // blocktime.go: the leader's poll plan
	stall      heads.Stalls // tipchain.go: heads that may be old news
	bootstraps atomic.Int32 // block time fetches tried

	headG      prometheus.Gauge // the tip's number
	blockTimeG prometheus.Gauge // the block time BlockTime gives, in seconds
}

func (h *Heads) init(p *Pool, m *Metrics, chain string) {
	h.p = p
	h.headG = m.chainHead.WithLabelValues(chain)
	h.blockTimeG = m.blockTime.WithLabelValues(chain)
	h.t.Init(p.log, func() time.Duration { return p.conf().BlockTime }, DefaultBlockTime, h.blockTimeG)
}

// members are the pool's remotes as heads.Member.
func (h *Heads) members() []heads.Member {
	rs := h.p.members()
	ms := make([]heads.Member, len(rs))
	for i, r := range rs {
		ms[i] = (*headMember)(r)
	}
	return ms
}

// headMember is a remote as heads.Member.
type headMember Remote

func (m *headMember) Judgement() *heads.Judgement { return &m.ht }
func (m *headMember) Claim() *heads.Report        { return m.claim.Load() }
func (m *headMember) Verified() bool              { return (*Remote)(m).chainVerified() }
func (m *headMember) OffChain() bool              { return m.cc.State() == health.Wrong }
func (m *headMember) Healthy(now time.Time) bool  { return (*Remote)(m).healthy(now) }
func (m *headMember) Vouch(n uint64)              { m.head.Store(n) }
func (m *headMember) Logger() *slog.Logger        { return m.log }

// changed judges every remote's latest report, moves the chain's tip
// and recomputes every remote's lag. It runs after every head report and
// every poll round.
func (h *Heads) changed() {
	p := h.p
	now := p.now()
	held := h.t.Round(h.members(), now, p.conf().MaxLag)
	for _, hh := range held {
		r := (*Remote)(hh.By.(*headMember))
		r.log.Warn("remote reports a head nothing corroborates; not followed",
			"claimed", hh.Claim.Number, "chain_head", hh.Tip)
		if hh.Evidence {
			p.misbehaved(r, misbehave.BogusHead, "eth_getBlockByNumber",
				fmt.Sprintf("claimed head %d while the chain's head is %d", hh.Claim.Number, hh.Tip))
		}
	}
	best := p.healthyBest(now)
	for _, r := range p.members() {
		// Heard only now that its report is judged: a report heard before
		// its head counts would vouch for a window its head shows behind.
		if at := r.reportedAt.Load(); at > r.heardAt.Load() {
			r.heardAt.Store(at)
		}
	}
	h.headG.Set(float64(h.t.Head()))
	for _, r := range p.members() {
		lag := uint64(0)
		if h := r.Head(); h < best {
			lag = best - h
		}
		r.m.lag.Set(float64(lag))
		ok := 0.0
		if r.available(now)&^outBusy == 0 && !p.lagging(r, best) {
			ok = 1
		}
		r.m.healthy.Set(ok)
	}
}

// judge judges r, a replacement not yet a member, against the members'
// heads (rotate.go).
func (h *Heads) judge(r *Remote, now time.Time) {
	h.t.Judge(h.members(), (*headMember)(r), now, h.p.conf().MaxLag)
}

// Head is the chain's head: the highest corroborated head across the
// chain's healthy remotes. It moves forward, and back only when the
// remotes agree on one far below it.
func (h *Heads) Head() uint64 { return h.t.Head() }

// HealthyHead is the highest head among the remotes in rotation right now:
// a block above it cannot be served by any of them yet.
func (h *Heads) HealthyHead() uint64 { return h.p.healthyBest(h.p.now()) }

// HeadChanged returns a channel closed when the tip next changes: a new
// head, or a sibling replacing it at the same height.
func (h *Heads) HeadChanged() <-chan struct{} { return h.t.HeadChanged() }

// Tip is the chain's head block: its number and hash ("" before the
// first head).
func (h *Heads) Tip() (uint64, string) {
	t := h.t.Tip()
	if t == nil {
		return 0, ""
	}
	return t.Number, t.Hash
}

// HeadStatus is the chain's head as the pool sees it, for status output.
type HeadStatus struct {
	Number uint64
	Hash   string
	// Time is the head block's timestamp; zero before the first head.
	Time time.Time
	// BlockTime is what the polling cadence follows; BlockTimeSource says
	// where it comes from (BlockTimeConfig, BlockTimeLearned or
	// BlockTimeDefault).
	BlockTime       time.Duration
	BlockTimeSource string
	// PollInterval is how often a remote's head is polled; a remote with
	// a ws url is polled only while its newHeads fall silent.
	PollInterval time.Duration
}

// HeadStatus reports the chain's head, its block time and the polling
// cadence.
func (h *Heads) HeadStatus() HeadStatus {
	bt, src := h.t.BlockTime()
	s := HeadStatus{BlockTime: bt, BlockTimeSource: src, PollInterval: h.pollInterval()}
	if t := h.t.Tip(); t != nil {
		s.Number, s.Hash, s.Time = t.Number, t.Hash, time.Unix(int64(min(t.Time, 1<<62)), 0)
	}
	return s
}

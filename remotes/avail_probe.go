package remotes

// The availability probe: when the chain's first call for old data comes
// (a chain nobody asks for history costs no probe) and every
// availability.probe_every after, each remote whose window config does not
// state is asked for a few old blocks of each kind of data, a bounded
// search for the oldest it serves (avail.go). In a cluster the results are
// shared (AvailShare), so that one replica probes a remote for all of them.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/remotes/verdict"
)

// Probe bounds.
const (
	// probeDepth: the probe's first block known to be kept is this far below
	// the remote's head, inside any pruned node's window (geth keeps 128)
	// and below where a lagging remote or a reorg makes answers unsure.
	probeDepth = 16
	// maxProbeCalls bounds the calls for one kind at one remote. The search
	// stops there with the oldest block it saw served: a window found a
	// little short costs some calls another remote could have served, never
	// a wasted attempt.
	maxProbeCalls = 12
	// probeTimeout bounds one remote's probe.
	probeTimeout = time.Minute
	// probeRetry is how soon a replica that lost the claim to probe a remote
	// looks for the result of the one that won (and claims again if none).
	probeRetry = 5 * time.Second
	// probeClaimTTL is how long a claim to probe a remote holds.
	probeClaimTTL = 2 * probeTimeout
)

// AvailShare is where a cluster's replicas share the windows one of them
// probed. The app gives a Redis one (package keyspace names its
// keys); without it every process probes for itself.
type AvailShare interface {
	// Load is the probe of remote last stored; ok false when there is none.
	Load(ctx context.Context, chain, remote string) (p Probed, ok bool, err error)
	// Claim takes the right to probe remote for ttl: false when another
	// replica holds it.
	Claim(ctx context.Context, chain, remote string, ttl time.Duration) (bool, error)
	// Store shares a probe's result.
	Store(ctx context.Context, chain, remote string, p Probed) error
}

// Probed is the result of one remote's probe: the oldest block of each kind
// of data it served (a kind the probe could not settle is absent), at its
// head Head.
type Probed struct {
	At     time.Time         `json:"at"`
	Head   uint64            `json:"head"`
	Oldest map[string]uint64 `json:"oldest"` // by DataKind.String()
	// Lacks is, by kind, the block below which the remote was found to
	// keep nothing (absent: as Oldest).
	Lacks map[string]uint64 `json:"lacks,omitempty"`
}

// note tells the probes that a call for old data came: a block more
// than a state window below the head, which a pruned remote may not keep.
// A call that comes before the chain has a head (head 0) is kept, and
// judged against the first head (due).
func (w *probeWanted) note(histAt, head uint64) {
	if w.seen.Load() {
		return
	}
	if head == 0 {
		for {
			old := w.early.Load()
			if old != 0 && old-1 <= histAt || w.early.CompareAndSwap(old, histAt+1) {
				return
			}
		}
	}
	if histAt+minPrunedWindow < head && w.seen.CompareAndSwap(false, true) {
		close(w.ch)
	}
}

// due says whether the probes are wanted at the chain's head: a call for
// old data came, or one came before the first head and is old at this one.
func (w *probeWanted) due(head uint64) bool {
	if early := w.early.Load(); early != 0 && head != 0 {
		w.note(early-1, head)
	}
	return w.seen.Load()
}

// probeWanted is closed by the chain's first call for old data.
type probeWanted struct {
	seen atomic.Bool
	ch   chan struct{}
	// early is 1 + the oldest block asked before the chain had a head (0:
	// none).
	early atomic.Uint64
}

// minPrunedWindow is the shortest state window nodes keep (geth's 128
// blocks): a call above it is served by every remote.
const minPrunedWindow = 128

// probeLoop probes r once the chain's first call for old data came and r
// has a head, and every probe_every after; it returns when ctx ends.
func (p *Pool) probeLoop(ctx context.Context, r *Remote) {
	if r.stated() {
		return // config wins: nothing to learn
	}
	for !p.wanted.due(p.heads.best.Load()) {
		select {
		case <-ctx.Done():
			return
		case <-p.wanted.ch:
		case <-p.heads.HeadChanged():
		}
	}
	for {
		if !p.awaitHead(ctx, r) {
			return
		}
		wait := p.probeOnce(ctx, r)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// awaitHead waits until r is on the right chain with a head deep enough to
// probe below; false when ctx ends first.
func (p *Pool) awaitHead(ctx context.Context, r *Remote) bool {
	tick := time.NewTicker(time.Second) // the chain check reports no event
	defer tick.Stop()
	for !r.chainVerified() || r.Head() <= 2*probeDepth {
		select {
		case <-ctx.Done():
			return false
		case <-p.heads.HeadChanged():
		case <-tick.C:
		}
	}
	return true
}

// probeOnce brings r's windows up to date, from the cluster's shared probe
// when it is fresh, else by probing (under the cluster's claim when there
// is a share); it returns when to look again.
func (p *Pool) probeOnce(ctx context.Context, r *Remote) time.Duration {
	cfg := p.conf()
	every, share := cfg.Availability.ProbeEvery, cfg.Availability.Share
	if share != nil {
		got, ok, err := share.Load(ctx, cfg.Chain, r.Name())
		if age := p.now().Sub(got.At); err == nil && ok && age < every {
			r.applyProbe(got)
			return every - age
		}
		won, err := share.Claim(ctx, cfg.Chain, r.Name(), probeClaimTTL)
		if err == nil && !won {
			return probeRetry // another replica is probing: take its result
		}
		if err != nil {
			p.log.Warn("availability share unreachable: probing alone", "remote", r.Name(), "err", err)
		}
	}
	got := p.probe(ctx, r)
	r.applyProbe(got)
	if share != nil {
		if err := share.Store(ctx, cfg.Chain, r.Name(), got); err != nil {
			p.log.Warn("availability probe not shared", "remote", r.Name(), "err", err)
		}
	}
	return every
}

// probe searches each kind of data at r for the oldest block it serves.
func (p *Pool) probe(ctx context.Context, r *Remote) Probed {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	head := r.Head()
	got := Probed{At: p.now(), Head: head, Oldest: make(map[string]uint64, len(DataKinds)),
		Lacks: make(map[string]uint64, len(DataKinds))}
	for _, k := range DataKinds {
		if oldest, lacks, ok := probeKind(ctx, r, k, head); ok {
			got.Oldest[k.String()], got.Lacks[k.String()] = oldest, lacks
		}
	}
	r.log.Info("remote availability probed", "head", head, "oldest", got.Oldest)
	return got
}

// probeKind is the oldest block of kind k that r served, and the block
// below which it served none, as far as at most maxProbeCalls calls tell;
// ok false when they could not tell (the method is not served, the remote
// failed). The search asks block 1 first (an archive answers it: one
// call), then gallops down from the head, where pruned windows end, and
// halves the gap left.
func probeKind(ctx context.Context, r *Remote, k DataKind, head uint64) (oldest, lacks uint64, ok bool) {
	calls := 0
	has := func(n uint64) (served, settled bool) {
		calls++
		return probeHas(ctx, r, k, n)
	}
	served, settled := has(1)
	if !settled {
		return 0, 0, false
	}
	if served {
		return 0, 0, true
	}
	good, bad := head-probeDepth, uint64(1)
	if served, settled = has(good); !settled || !served {
		return 0, 0, false // not even recent blocks: a broken remote, not a window
	}
	for d := uint64(2 * probeDepth); calls < maxProbeCalls && d < head && head-d > bad; d *= 4 {
		served, settled = has(head - d)
		if !settled {
			return good, bad + 1, true
		}
		if !served {
			bad = head - d
			break
		}
		good = head - d
	}
	for calls < maxProbeCalls && good-bad > 1 {
		mid := bad + (good-bad)/2
		served, settled = has(mid)
		if !settled {
			break
		}
		if served {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, bad + 1, true
}

// probeHas asks r for kind k at block n: served when it answered with the
// data, settled when the answer says either way (a pruned or missing
// answer settles it unserved; a fault, a limit or a method r lacks does
// not).
func probeHas(ctx context.Context, r *Remote, k DataKind, n uint64) (served, settled bool) {
	method, params := probeCall(k, n)
	if !r.supports(method) {
		return false, false
	}
	res, err := r.call(ctx, method, params)
	if err != nil {
		return false, lacksData(verdict.Classify(method, err))
	}
	if isNull(res) {
		return false, k == KindBlocks
	}
	return true, true
}

// probeCall is the call that reads kind k at block n, and as little else as
// a node allows.
func probeCall(k DataKind, n uint64) (string, json.RawMessage) {
	b := strconv.Quote("0x" + strconv.FormatUint(n, 16))
	switch k {
	case KindState:
		return "eth_getBalance", json.RawMessage(`["0x0000000000000000000000000000000000000000",` + b + `]`)
	case KindBlocks:
		return "eth_getBlockByNumber", json.RawMessage(`[` + b + `,false]`)
	case KindLogs:
		return "eth_getLogs", json.RawMessage(fmt.Sprintf(`[{"fromBlock":%s,"toBlock":%s}]`, b, b))
	}
	return "trace_block", json.RawMessage(`[` + b + `]`)
}

// applyProbe sets r's windows from a probe's result, over what answers
// taught: a probe may lower a window they raised. Kinds it could not
// settle keep what they had.
func (r *Remote) applyProbe(got Probed) {
	if r.stated() {
		return
	}
	for _, k := range DataKinds {
		if o, ok := got.Oldest[k.String()]; ok {
			lacks, known := got.Lacks[k.String()]
			if !known || lacks > o {
				lacks = o
			}
			r.setMark(k, &mark{oldest: o, lacks: lacks, atHead: got.Head, probed: true, at: got.At})
		}
	}
}

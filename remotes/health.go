package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/wire"
)

// track follows one remote until ctx ends: it verifies the chain id, and
// again every ChainRecheck and whenever its health.Check asks, then keeps the
// remote's head fresh, polling at the cadence's interval (the chain's block
// time), and at once when the cadence moves. While the pool leads the
// chain, the polls follow the leader's plan instead (heads.Plan): quiet
// until the next block is due, dense around it, and a tip some remote
// reported re-plans at once. With a ws url the head arrives over newHeads
// and polling only fills in once that stream has been silent for two
// intervals, so paid providers are not billed for idle polling. A remote
// fed by the cluster's feed (feed.go) is not polled at all. onChange is
// called after every check, so head and health gauges stay current.
func (r *Remote) track(ctx context.Context, chainID uint64, cadence func() (time.Duration, <-chan struct{}),
	pace headPacer, onChange func()) {
	every, retimed := cadence()
	// Spread the polls of many remotes over a fraction of a block, from
	// the first that follows the cadence (brisk retries are not put off).
	jitter := time.Duration(rand.Int64N(int64(every)/4 + 1))
	timer := time.NewTimer(0)
	defer timer.Stop()
	var tipMoved <-chan struct{}
	for {
		replan := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-retimed:
			timer.Stop()
		case <-tipMoved:
			timer.Stop()
			replan = true
		case <-r.cc.Kicked(): // the chain id is in doubt (health.Check)
			timer.Stop()
		}
		r.feed.busy.Store(true) // before the fed flag is read (Fed)
		every, retimed = cadence()
		tipMoved = nil
		if pace.Leading() {
			tipMoved = pace.HeadChanged()
		}
		next, brisk := every, false
		paced := false
		// A fed remote's chain id is the leader's to ask every ChainRecheck.
		if r.cc.OwnDue(r.fed(), r.now()) {
			// A failed check of a remote still verified polls anyway: the
			// poll is what opens the breaker of a remote that went down.
			if r.verifyChain(ctx, chainID) || r.chainVerified() {
				r.pacedPoll(ctx, pace, onChange)
			}
			if d, ok := r.cc.Retry(every, r.brk.Cooldown()); ok {
				next, brisk = d, true // until the remote answers, retry briskly
			} else if r.chainVerified() && !r.fed() {
				// A recheck is no reason to miss the next block.
				next, paced = pace.nextPoll(r.now())
				if !paced {
					next = every
				}
			}
		} else if r.chainVerified() && !r.fed() {
			// A head seen over newHeads within two block times makes the poll
			// redundant; look again when that silence would reach them.
			if silent := r.now().Sub(time.Unix(0, r.wsHeadAt.Load())); silent < 2*every {
				next = 2*every - silent
			} else {
				if !replan {
					r.pacedPoll(ctx, pace, onChange)
				}
				next, paced = pace.nextPoll(r.now())
				if !paced {
					next = every
				}
			}
		}
		if !brisk && r.chainVerified() && r.claim.Load() == nil && !r.fed() {
			// No head yet (its first poll failed): out of rotation until
			// it has one, so asked again as briskly, not a block time on.
			next, brisk = min(every, health.RetryEvery), true
		}
		onChange() // health can change without a new head: keep the gauges true
		if !brisk && !paced {
			next += jitter
			jitter = 0
		}
		r.feed.busy.Store(false)
		timer.Reset(next)
	}
}

// headPacer plans the polls of a leader's remotes (heads.Plan); Heads is
// one.
type headPacer interface {
	nextPoll(now time.Time) (time.Duration, bool)
	paced(sent time.Time, head uint64, poll bool)
	Leading() bool
	HeadChanged() <-chan struct{}
}

// pacedPoll is pollChecked, telling pace when the poll was sent and what
// it saw.
func (r *Remote) pacedPoll(ctx context.Context, pace headPacer, onHead func()) {
	sent := r.now()
	r.pollChecked(ctx, onHead)
	if c := r.claim.Load(); c != nil && r.chainVerified() {
		pace.paced(sent, c.Number, true)
	}
}

// pollChecked is poll, watching the claimed head for a jump that asks for
// a chain check (chaincheck.go).
func (r *Remote) pollChecked(ctx context.Context, onHead func()) {
	old := r.claimedHead()
	r.poll(ctx, onHead)
	r.cc.HeadMoved(old, r.claimedHead(), r.now())
}

// watch follows the remote's newHeads over its ws url until ctx ends,
// while the remote is not fed (feed.go): a fed remote's subscription is
// closed, and opened again when it is no longer fed. cadence's channel
// says when to look at the fed flag again.
func (r *Remote) watch(ctx context.Context, cadence func() (time.Duration, <-chan struct{}), pace headPacer, onHead func()) {
	for {
		_, changed := cadence()
		if r.fed() {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				continue
			}
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.watchOnce(wctx, pace, onHead) }()
	wait:
		for {
			select {
			case <-done:
				stop()
				return // ctx ended, or the subscription cannot be made
			case <-changed:
				if r.fed() {
					break wait
				}
				_, changed = cadence()
			}
		}
		stop()
		<-done
	}
}

// watchOnce follows the remote's newHeads until ctx ends.
func (r *Remote) watchOnce(ctx context.Context, pace headPacer, onHead func()) {
	opts := wire.Options{Name: r.cfg.Name, URL: r.relayURL(), OtherURLs: []string{r.cfg.URL, r.cfg.WSURL},
		Headers: headerOf(r.cfg.Headers), MaxResponseBytes: 1 << 20, Logger: r.log}
	opts.OnSubscribed = r.cc.Reconnected // a new stream may be another chain's
	opts.Bill = r.bill
	heads.Watch(ctx, opts, func(h *heads.Report) {
		if !r.cc.HeadsTrusted() {
			return
		}
		now := r.now()
		r.wsHeadAt.Store(now.UnixNano())
		old := r.claimedHead()
		if r.noteHead(h) {
			pace.paced(now, h.Number, false)
			onHead()
		}
		r.cc.HeadMoved(old, r.claimedHead(), now)
	})
}

// verifyChain asks the remote for its chain id and reports whether it is on
// the chain (health.Check records the answer). A remote on the wrong chain
// is never used: that is logged loudly. A check without an answer leaves
// the state as it was.
func (r *Remote) verifyChain(ctx context.Context, want uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	r.bill("eth_chainId")
	res, _, err := r.t.Call(ctx, "eth_chainId", nil)
	if err != nil {
		if ctx.Err() == nil {
			r.noteError(err)
			r.cc.Failed("remote chain id check failed; will retry", err, r.now())
		}
		return false
	}
	got, err := parseQuantityJSON(res)
	if err != nil {
		r.noteError(err)
		r.cc.Failed("remote sent a bad chain id; will retry", err, r.now())
		return false
	}
	return r.chainChecked(want, got)
}

// latestHeader is the poll's params: the latest block without its
// transactions, one call like eth_blockNumber, that also says the block's
// hash, parent and timestamp.
var latestHeader = json.RawMessage(`["latest",false]`)

// poll asks for the latest block through the breaker-aware call path, so a
// dead remote's polls count as faults and a recovered one's as the probe
// that closes its breaker.
func (r *Remote) poll(ctx context.Context, onHead func()) {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	res, err := r.call(ctx, "eth_getBlockByNumber", latestHeader)
	if err != nil || isNull(res) {
		return
	}
	h, err := heads.ParseReport(res)
	if err != nil {
		r.log.Debug("remote sent a malformed latest block", "err", err)
		return
	}
	if r.noteHead(h) {
		onHead()
	}
}

func (r *Remote) probeTimeout() time.Duration {
	if r.cfg.Timeout > 0 && r.cfg.Timeout < 5*time.Second {
		return r.cfg.Timeout
	}
	return 5 * time.Second
}

func parseQuantityJSON(raw json.RawMessage) (uint64, error) {
	s, err := strconv.Unquote(string(raw))
	if err != nil {
		return 0, fmt.Errorf("not a quantity: %.40s", raw)
	}
	return evm.ParseQuantity(s)
}

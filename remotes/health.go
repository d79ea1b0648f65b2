package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// wrongChainRecheck is how often a remote found on the wrong chain is asked
// again (an operator may fix the endpoint without restarting venn).
const wrongChainRecheck = 5 * time.Minute

// track follows one remote until ctx ends: it verifies the chain id, then
// keeps the remote's head fresh, polling at the cadence's interval (the
// chain's block time), and at once when the cadence moves. With a ws url the head arrives over newHeads and polling
// only fills in once that stream has been silent for two intervals, so
// paid providers are not billed for idle polling. onChange is called after
// every check, so head and health gauges stay current.
func (r *Remote) track(ctx context.Context, chainID uint64, cadence func() (time.Duration, <-chan struct{}), onChange func()) {
	every, retimed := cadence()
	// Spread the first polls of many remotes over a fraction of a block.
	jitter := time.Duration(rand.Int64N(int64(every)/4 + 1))
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastCheck time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-retimed:
			timer.Stop()
		}
		every, retimed = cadence()
		next := every
		switch r.chainState.Load() {
		case chainUnknown:
			ok := r.verifyChain(ctx, chainID)
			lastCheck = r.now() // a wrong chain is asked again only after wrongChainRecheck
			if ok {
				r.poll(ctx, onChange)
			} else {
				next = min(every, 2*time.Second) // until first contact, retry briskly
			}
		case chainWrong:
			if r.now().Sub(lastCheck) >= wrongChainRecheck {
				lastCheck = r.now()
				if r.verifyChain(ctx, chainID) {
					r.poll(ctx, onChange)
				}
			}
		default:
			// A head seen over newHeads within two block times makes the poll
			// redundant; look again when that silence would reach them.
			if silent := r.now().Sub(time.Unix(0, r.wsHeadAt.Load())); silent < 2*every {
				next = 2*every - silent
			} else {
				r.poll(ctx, onChange)
			}
		}
		onChange() // health can change without a new head: keep the gauges true
		timer.Reset(next + jitter)
		jitter = 0
	}
}

// watch follows the remote's newHeads over its ws url until ctx ends.
func (r *Remote) watch(ctx context.Context, onHead func()) {
	opts := transportOptions{Name: r.cfg.Name, URL: r.relayURL(),
		Headers: headerOf(r.cfg.Headers), MaxResponseBytes: 1 << 20, Logger: r.log}
	watchHeads(ctx, opts, func(h *headReport) {
		if !r.chainVerified() {
			return
		}
		r.wsHeadAt.Store(r.now().UnixNano())
		if r.noteHead(h) {
			onHead()
		}
	})
}

// retryLogEvery spaces the warnings of a remote that stays unreachable at
// start: it is retried every 2 s, and its log must not be a wall of them.
const retryLogEvery = time.Minute

// retryLog warns about a failed first contact at most once per
// retryLogEvery, and logs the retries in between at debug.
func (r *Remote) retryLog(msg string, err error) {
	now := r.now().UnixNano()
	if last := r.retryLogAt.Load(); last != 0 && now-last < int64(retryLogEvery) {
		r.log.Debug(msg, "err", err)
		return
	}
	r.retryLogAt.Store(now)
	r.log.Warn(msg, "err", err, "next_warning_in", retryLogEvery)
}

// verifyChain asks the remote for its chain id. A remote on the wrong chain
// is never used: that is logged loudly.
func (r *Remote) verifyChain(ctx context.Context, want uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	res, err := r.t.call(ctx, "eth_chainId", nil)
	if err != nil {
		if ctx.Err() == nil {
			r.retryLog("remote chain id check failed; will retry", err)
		}
		return false
	}
	got, err := parseQuantityJSON(res)
	if err != nil {
		r.retryLog("remote sent a bad chain id; will retry", err)
		return false
	}
	if got != want {
		if r.chainState.Swap(chainWrong) != chainWrong {
			r.log.Error("REMOTE IS ON THE WRONG CHAIN: it will not be used",
				"want_chain_id", want, "got_chain_id", got)
		}
		r.m.healthy.Set(0)
		return false
	}
	if r.chainState.Swap(chainOK) != chainOK {
		r.log.Info("remote chain id verified", "chain_id", got)
	}
	return true
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
	h, err := parseHeadReport(res)
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

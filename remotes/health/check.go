package health

// A remote's chain id is not a fact learnt once: a provider re-points an
// endpoint at another network, a load balancer fails over to a node of
// another chain, a self-hosted node is restarted with another genesis. The
// remote then answers every call well, with another chain's blocks, and
// nothing but eth_chainId tells. So the chain id is asked again:
//
//   - every ChainRecheck (one eth_chainId, cheap), whatever the last answer;
//   - at once, and before the remote is used again, when its breaker
//     opened: it was down, and what comes back may not be what left;
//   - at once when its newHeads stream reconnects (the heads of the new
//     stream are ignored until the check passes), when its WebSocket call
//     connection is dialled again, and when its head jumps further than a
//     reorg or a lagging backend explains (heads.MaxStepBack), the usual sign
//     of a switch. The remote stays in rotation meanwhile: taking it out
//     for every reconnect would fail the calls of a chain with one remote.
//
// A remote found on another chain leaves rotation at once (its State is
// Wrong), the answer of one of its calls still in flight is dropped (the
// pool fails it over), and a switch logs once, loudly. It comes back only
// after a later check reports the right chain.

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/remotes/heads"
)

// DefaultChainRecheck is how often a remote's chain id is asked again.
const DefaultChainRecheck = time.Minute

// Chain check timings.
const (
	// RetryEvery: a remote whose chain is not known (never checked, or
	// unsure after an outage) is asked this often until it answers.
	RetryEvery = 2 * time.Second
	// headJumpRecheckMin spaces the checks a jumping head asks for: a
	// remote catching up after a sync jumps at every poll.
	headJumpRecheckMin = 10 * time.Second
	// retryLogEvery spaces the warnings of a remote that stays
	// unreachable at start: it is retried every 2 s, and its log must
	// not be a wall of them.
	retryLogEvery = time.Minute
)

// State is what a remote's chain id checks found.
type State int32

// Chain verification states.
const (
	Unknown State = 0  // never answered
	OK      State = 1  // on the chain
	Wrong   State = -1 // on another chain: never used
	// Stale: the remote was on the right chain, but may not be any more
	// (its breaker opened, its connection was dialled again); it is out
	// of rotation until a check says the right chain.
	Stale State = 2
)

// Counter and Gauge are the series a Check keeps (prometheus.Counter,
// prometheus.Gauge).
type (
	Counter interface{ Inc() }
	Gauge   interface{ Set(float64) }
)

// Check is a remote's chain re-check state. Init it before use.
type Check struct {
	state     atomic.Int32  // a State
	kick      chan struct{} // buffered 1: the tracker checks at once
	due       atomic.Bool   // a check is asked for (Soon)
	headsHeld atomic.Bool   // the heads stream reconnected: its heads wait for a check
	at        atomic.Int64  // unix nanos of the last check answered (right or wrong)
	every     atomic.Int64  // ChainRecheck, in nanoseconds; a reload sets it
	warnedAt  atomic.Int64  // unix nanos of the last first-contact warning

	log               *slog.Logger
	ok, wrong, failed Counter
	wrongGauge        Gauge
}

// Init readies c: log is the remote's, ok, wrong and failed count the
// checks by outcome, and wrongGauge is 1 while the last check found the
// remote on another chain.
func (c *Check) Init(log *slog.Logger, ok, wrong, failed Counter, wrongGauge Gauge) {
	c.kick = make(chan struct{}, 1)
	c.every.Store(int64(DefaultChainRecheck))
	c.log, c.ok, c.wrong, c.failed, c.wrongGauge = log, ok, wrong, failed, wrongGauge
}

// State is what the checks found.
func (c *Check) State() State { return State(c.state.Load()) }

// Verified reports whether the remote is known to be on the chain.
func (c *Check) Verified() bool { return c.State() == OK }

// Carried makes c, the check of a remote that replaces a verified one at
// the same endpoint, verified, and asks for a check at once.
func (c *Check) Carried() {
	c.state.Store(int32(OK))
	c.due.Store(true)
}

// SetEvery sets how often the chain id is asked again (ChainRecheck).
func (c *Check) SetEvery(d time.Duration) { c.every.Store(int64(d)) }

// Every is how often the chain id is asked again.
func (c *Check) Every() time.Duration { return time.Duration(c.every.Load()) }

// Kicked is closed-to-receive when a check is asked for now: the tracker
// waits on it.
func (c *Check) Kicked() <-chan struct{} { return c.kick }

// wake asks the tracker for a check now; it never blocks.
func (c *Check) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Unsure takes a remote on the right chain out of rotation until its
// chain id is checked again, and asks for that check now. It reports
// whether the remote left rotation.
func (c *Check) Unsure(why string) bool {
	left := c.state.CompareAndSwap(int32(OK), int32(Stale))
	if left {
		c.log.Info("remote chain id to be checked again before use", "why", why)
	}
	c.wake()
	return left
}

// Soon asks for a check now, the remote staying in rotation.
func (c *Check) Soon() {
	c.due.Store(true)
	c.wake()
}

// Reconnected holds the heads of a new newHeads stream until the chain id
// is checked again.
func (c *Check) Reconnected() {
	c.headsHeld.Store(true)
	c.wake()
}

// HeadsHeld reports whether a new newHeads stream's heads wait for a
// check; HeadsTrusted, whether they may be used.
func (c *Check) HeadsHeld() bool    { return c.headsHeld.Load() }
func (c *Check) HeadsTrusted() bool { return c.Verified() && !c.HeadsHeld() }

// HeadMoved asks for a check when the remote's claimed head moved from
// old to n further than a reorg or a lagging backend explains, in either
// direction.
func (c *Check) HeadMoved(old, n uint64, now time.Time) {
	if old == 0 || n == old {
		return
	}
	if d := max(n, old) - min(n, old); d <= heads.MaxStepBack {
		return
	}
	if now.UnixNano()-c.at.Load() < int64(headJumpRecheckMin) {
		return
	}
	c.log.Debug("remote head jumped: chain id to be checked", "from", old, "to", n)
	c.Soon()
}

// Due reports whether the tracker must ask the chain id now.
func (c *Check) Due(now time.Time) bool {
	switch c.State() {
	case Unknown, Stale:
		return true
	}
	if c.due.Load() || c.headsHeld.Load() {
		return true
	}
	return now.UnixNano()-c.at.Load() >= c.every.Load()
}

// OwnDue is Due for a remote that may be fed by the cluster's feed: the
// leader asks a fed remote's chain id every ChainRecheck, so this replica
// asks only what it has its own reason to (never checked, its breaker
// opened, a head jump).
func (c *Check) OwnDue(fed bool, now time.Time) bool {
	if fed && c.Verified() && !c.due.Load() && !c.headsHeld.Load() {
		return false
	}
	return c.Due(now)
}

// Retry is the wait before the next check when the last one left the
// chain unknown: brisk until the remote answers, then ChainRecheck. every
// is the poll interval; cooldown, how long the remote's open breaker
// waits before its probe.
func (c *Check) Retry(every, cooldown time.Duration) (time.Duration, bool) {
	switch c.State() {
	case Unknown:
		return min(every, RetryEvery), true
	case Stale:
		// Out of rotation after its breaker opened: asked as often as
		// the breaker would let a probe through, so the check does not
		// hold it out longer than its cooldown.
		return min(every, RetryEvery, cooldown), true
	}
	if c.due.Load() || c.headsHeld.Load() {
		return min(every, RetryEvery), true
	}
	return 0, false
}

// Checked records the answer of a check at now: got is the remote's chain
// id, want the chain's. It reports the state the check found the remote
// in before (was), and whether it is on the chain.
func (c *Check) Checked(want, got uint64, now time.Time) (was State, ok bool) {
	c.at.Store(now.UnixNano())
	c.due.Store(false)
	if got != want {
		c.wrong.Inc()
		was = State(c.state.Swap(int32(Wrong)))
		switch was {
		case Wrong:
		case Unknown:
			c.log.Error("REMOTE IS ON THE WRONG CHAIN: it will not be used",
				"want_chain_id", want, "got_chain_id", got, "recheck_every", c.Every())
		default:
			c.log.Error("REMOTE SWITCHED TO ANOTHER CHAIN: out of rotation until it is back",
				"want_chain_id", want, "got_chain_id", got, "recheck_every", c.Every())
		}
		c.wrongGauge.Set(1)
		return was, false
	}
	c.ok.Inc()
	c.headsHeld.Store(false)
	switch was = State(c.state.Swap(int32(OK))); was {
	case Unknown:
		c.log.Info("remote chain id verified", "chain_id", got)
	case Wrong:
		c.log.Warn("remote is on the right chain again: back in rotation", "chain_id", got)
	}
	c.wrongGauge.Set(0)
	return was, true
}

// Failed records a check at now that got no usable answer: it warns at
// most once per retryLogEvery, and logs the failures in between at debug.
func (c *Check) Failed(msg string, err error, now time.Time) {
	c.failed.Inc()
	if last := c.warnedAt.Load(); last != 0 && now.UnixNano()-last < int64(retryLogEvery) {
		c.log.Debug(msg, "err", err)
		return
	}
	c.warnedAt.Store(now.UnixNano())
	c.log.Warn(msg, "err", err, "next_warning_in", retryLogEvery)
}

// Set makes s the state without a check: a test's setup.
func (c *Check) Set(s State) { c.state.Store(int32(s)) }

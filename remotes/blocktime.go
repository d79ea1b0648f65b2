package remotes

// The chain's block time, learned from the timestamps of its heads
// (heads.Tracker); block_time in config overrides it for the polling
// cadence.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/heads"
)

// Block time learning limits.
const (
	// blockTimeBootstrap: at the first head, the block this far below it
	// is fetched once, so the block time is known at once.
	blockTimeBootstrap = 64
)

// Block time sources, as HeadStatus reports them.
const (
	BlockTimeConfig  = heads.SourceConfig
	BlockTimeLearned = heads.SourceLearned
	BlockTimeDefault = heads.SourceDefault
)

// BlockTime is the chain's block time: block_time from config when set,
// else what the block timestamps say, else DefaultBlockTime until they
// have said. Heads are polled at this cadence.
func (h *Heads) BlockTime() time.Duration {
	d, _ := h.t.BlockTime()
	return d
}

// pollInterval is how often a remote's head is polled.
func (h *Heads) pollInterval() time.Duration { return h.BlockTime() }

// pollCadence is the poll interval and a channel closed when it next
// moves.
func (h *Heads) pollCadence() (time.Duration, <-chan struct{}) {
	ch := h.t.Retimed()
	return h.pollInterval(), ch
}

// learnBlockTime fetches, at the first head, the block blockTimeBootstrap
// below it, so that the block time is known at once rather than after a
// few blocks. While the timestamps have not told it, it tries again at a
// later head, at most every bootstrapRetry.
func (h *Heads) learnBlockTime(ctx context.Context) {
	var last time.Time
	for {
		wake := h.HeadChanged()
		if tip := h.t.Tip(); tip != nil && tip.Number > 1 && h.t.Learned() == 0 &&
			(last.IsZero() || time.Since(last) >= bootstrapRetry) {
			last = time.Now()
			h.bootstrapBlockTime(ctx, tip)
			h.bootstraps.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

// bootstrapRetry spaces the fetches of an older block that failed.
const bootstrapRetry = time.Minute

func (h *Heads) bootstrapBlockTime(ctx context.Context, tip *heads.Report) {
	p := h.p
	// Not genesis: its timestamp is often made up.
	below := tip.Number - min(tip.Number-1, blockTimeBootstrap)
	// Asked of the remotes that have the block, directly, the tip's
	// reporter first: a client call's votes and hedges have no business
	// here. A fed remote is not asked (feed.go): the leader tracks its
	// heads, and the feed's timestamps teach this replica the block time.
	var from []*Remote
	now := p.now()
	h.t.Lock()
	for _, r := range p.members() {
		if v := r.ht.Vouched; v != nil && v.Number >= below && !r.fed() && r.available(now) == 0 {
			if v == tip {
				from = append([]*Remote{r}, from...)
			} else {
				from = append(from, r)
			}
		}
	}
	h.t.Unlock()
	for _, r := range from {
		old, err := r.blockAt(ctx, below)
		if err != nil || old.Time > tip.Time {
			p.log.Debug("block time: older block unusable", "remote", r.Name(), "number", below, "err", err)
			continue
		}
		if d, ok := h.t.Below(old.Number, old.Time); ok {
			p.log.Info("block time learned from block timestamps", "block_time", d, "poll_interval", h.pollInterval())
			h.changed() // judge again by the block time now known
		}
		return
	}
}

// blockAt fetches block n's header fields from the remote.
func (r *Remote) blockAt(ctx context.Context, n uint64) (*heads.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout())
	defer cancel()
	res, err := r.call(ctx, "eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`))
	if err != nil {
		return nil, err
	}
	if isNull(res) {
		return nil, fmt.Errorf("block %d: null", n)
	}
	b, err := heads.ParseReport(res)
	if err != nil {
		return nil, err
	}
	if b.Number != n {
		return nil, fmt.Errorf("block %d: got %d", n, b.Number)
	}
	return b, nil
}

// The leader polls when the block is due (heads.Plan): while this
// replica leads the chain, its pollers follow the plan, fed what each
// poll and newHeads saw.

// SetLeading switches the pool's pollers to the due-time plan (true:
// this replica leads the chain) or back to the block-time cadence.
func (h *Heads) SetLeading(on bool) {
	if h.pace.Lead(on) {
		h.retrack() // the trackers plan their next poll again
	}
}

// Leading reports whether the pool polls on the due-time plan.
func (h *Heads) Leading() bool {
	return h.pace.Leading()
}

// paced records what a poll sent at sent saw: the remote's head number.
// A head over newHeads is recorded with sent its arrival.
func (h *Heads) paced(sent time.Time, head uint64, poll bool) {
	h.pace.Saw(sent, head, poll, h.BlockTime())
}

// nextPoll is how long a leader's poller waits before its next poll, and
// false when the pool does not lead (the block-time cadence applies).
func (h *Heads) nextPoll(now time.Time) (time.Duration, bool) {
	return h.pace.Next(now, h.BlockTime())
}

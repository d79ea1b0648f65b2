package heads

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/venn-gateway/venn/remotes/wire"
)

// Head-following limits.
const (
	headsBackoffMin = 500 * time.Millisecond
	headsBackoffMax = 30 * time.Second
	// headsHealthyAfter is how long a subscription must have lived for its
	// loss to count as a new outage, restarting the backoff from the minimum.
	headsHealthyAfter = 30 * time.Second
)

// Watch follows eth_subscribe("newHeads") on opts.URL, a ws(s) URL,
// until ctx ends, calling onHead for each header in the order received. It
// redials with capped exponential backoff and jitter, logs each outage once
// at Warn by the remote's name, and returns after closing its connection.
//
// onHead runs on the reading goroutine: while it blocks, pongs are not read,
// and a block longer than the ping timeout costs a reconnect.
func Watch(ctx context.Context, opts wire.Options, onHead func(*Report)) {
	w, err := newHeadWatcher(opts, onHead)
	if err != nil {
		opts.Logger.Error("remote heads not followed", "remote", opts.Name, "err", err)
		return
	}
	w.run(ctx)
}

// headWatcher is one remote's newHeads follower: a wsSubscription run
// again after each loss. Its timings are fields so that tests can shorten
// them.
type headWatcher struct {
	name   string
	log    *slog.Logger
	sub    *wire.Subscription
	onHead func(*Report)
	onSub  func() // nil: none
	outage bool   // logged at Warn, and not yet over

	backoffMin, backoffMax time.Duration
	healthyAfter           time.Duration
}

func newHeadWatcher(opts wire.Options, onHead func(*Report)) (*headWatcher, error) {
	w := &headWatcher{
		name:         opts.Name,
		onHead:       onHead,
		onSub:        opts.OnSubscribed,
		backoffMin:   headsBackoffMin,
		backoffMax:   headsBackoffMax,
		healthyAfter: headsHealthyAfter,
	}
	sub, err := wire.NewSubscription("heads", opts, json.RawMessage(`["newHeads"]`),
		wire.SubHooks{Subscribed: w.subscribed, Result: w.result})
	if err != nil {
		return nil, err
	}
	w.sub, w.log = sub, sub.Logger()
	return w, nil
}

func (w *headWatcher) run(ctx context.Context) {
	attempt := 0
	for {
		subscribed, err := w.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if subscribed.IsZero() || time.Since(subscribed) < w.healthyAfter {
			attempt++
		} else {
			attempt = 1
		}
		if !w.outage {
			w.log.Warn("remote heads connection lost", "remote", w.name, "err", err)
			w.outage = true
		} else {
			w.log.Debug("remote heads reconnect failed", "remote", w.name, "err", err)
		}

		t := time.NewTimer(w.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// backoff is the wait before reconnect attempt n (1-based): doubling from
// backoffMin up to backoffMax, with "equal jitter" so that remotes lost
// together do not redial together.
func (w *headWatcher) backoff(n int) time.Duration {
	d := w.backoffMin
	for i := 1; i < n && d < w.backoffMax; i++ {
		d *= 2
	}
	d = min(d, w.backoffMax)
	half := d / 2
	return half + rand.N(half+1)
}

// session runs one subscription: a panic in it (onHead's, say) ends the
// session like a lost connection rather than the process.
func (w *headWatcher) session(ctx context.Context) (subscribed time.Time, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("remote %s: heads: panic: %v", w.name, p)
		}
	}()
	return w.sub.Run(ctx)
}

// subscribed is the subscription confirmed: it ends an outage.
func (w *headWatcher) subscribed() {
	if w.onSub != nil {
		w.onSub()
	}
	if w.outage {
		w.log.Info("remote heads connection restored", "remote", w.name)
		w.outage = false
	}
}

// result is a notification's header.
func (w *headWatcher) result(res json.RawMessage) {
	h, err := ParseReport(res)
	if err != nil {
		w.log.Debug("remote heads: malformed head", "remote", w.name, "err", err)
		return
	}
	w.onHead(h)
}

package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Head-following limits.
const (
	headsBackoffMin = 500 * time.Millisecond
	headsBackoffMax = 30 * time.Second
	// headsHealthyAfter is how long a subscription must have lived for its
	// loss to count as a new outage, restarting the backoff from the minimum.
	headsHealthyAfter = 30 * time.Second
	// headsSubscribeID is the id of the one call sent on a heads connection.
	headsSubscribeID = 1
)

// watchHeads follows eth_subscribe("newHeads") on opts.URL, a ws(s) URL,
// until ctx ends, calling onHead for each header in the order received. It
// redials with capped exponential backoff and jitter, logs each outage once
// at Warn by the remote's name, and returns after closing its connection.
//
// onHead runs on the reading goroutine: while it blocks, pongs are not read,
// and a block longer than the ping timeout costs a reconnect.
func watchHeads(ctx context.Context, opts transportOptions, onHead func(*headReport)) {
	w, err := newHeadWatcher(opts, onHead)
	if err != nil {
		opts.Logger.Error("remote heads not followed", "remote", opts.Name, "err", err)
		return
	}
	w.run(ctx)
}

// headWatcher is one remote's newHeads follower. Its timings are fields so
// that tests can shorten them.
type headWatcher struct {
	name     string
	url      string // never in an error or log
	red      *redactor
	maxBytes int64
	dialOpts *websocket.DialOptions
	log      *slog.Logger
	onHead   func(*headReport)
	onSub    func() // nil: none

	backoffMin, backoffMax time.Duration
	healthyAfter           time.Duration
	pingInterval           time.Duration
	pingTimeout            time.Duration
}

func newHeadWatcher(opts transportOptions, onHead func(*headReport)) (*headWatcher, error) {
	u, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("remote %s: url: heads need a ws or wss scheme", opts.Name)
	}
	return &headWatcher{
		name:         opts.Name,
		url:          opts.URL,
		red:          opts.redactor(),
		maxBytes:     opts.MaxResponseBytes,
		dialOpts:     wsDialOptions(opts),
		log:          opts.Logger,
		onHead:       onHead,
		onSub:        opts.OnSubscribed,
		backoffMin:   headsBackoffMin,
		backoffMax:   headsBackoffMax,
		healthyAfter: headsHealthyAfter,
		pingInterval: wsPingInterval,
		pingTimeout:  wsPingTimeout,
	}, nil
}

func (w *headWatcher) run(ctx context.Context) {
	var (
		attempt int
		outage  bool // logged at Warn, and not yet over
	)
	for {
		subscribed, err := w.session(ctx, &outage)
		if ctx.Err() != nil {
			return
		}
		if subscribed.IsZero() || time.Since(subscribed) < w.healthyAfter {
			attempt++
		} else {
			attempt = 1
		}
		if !outage {
			w.log.Warn("remote heads connection lost", "remote", w.name, "err", err)
			outage = true
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

// session dials, subscribes and delivers heads until the connection fails or
// ctx ends. It returns when the subscription was confirmed (zero if never)
// and why the session ended. It clears *outage once subscribed.
func (w *headWatcher) session(ctx context.Context, outage *bool) (subscribed time.Time, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("remote %s: heads: panic: %v", w.name, p)
		}
	}()

	dctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	ws, _, err := websocket.Dial(dctx, w.url, w.dialOpts)
	cancel()
	if err != nil {
		return time.Time{}, failure(ctx, w.name, w.red, "heads dial", err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(w.maxBytes)

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { w.ping(sctx, ws) })

	req := appendRequest(nil, headsSubscribeID, "eth_subscribe", json.RawMessage(`["newHeads"]`))
	wctx, cancel := context.WithTimeout(sctx, wsWriteTimeout)
	err = ws.Write(wctx, websocket.MessageText, req)
	cancel()
	if err != nil {
		return time.Time{}, failure(ctx, w.name, w.red, "heads subscribe", err)
	}

	for {
		_, data, err := ws.Read(sctx)
		if err != nil {
			return subscribed, failure(ctx, w.name, w.red, "heads read", err)
		}
		env, err := parseEnvelope(data)
		if err != nil {
			w.log.Debug("remote heads: malformed message", "remote", w.name, "err", err)
			continue
		}
		switch {
		case env.idIs(headsSubscribeID):
			if _, err := env.outcome(w.name, w.red, 0); err != nil {
				return subscribed, fmt.Errorf("heads subscribe: %w", err)
			}
			subscribed = time.Now()
			if w.onSub != nil {
				w.onSub()
			}
			if *outage {
				w.log.Info("remote heads connection restored", "remote", w.name)
				*outage = false
			}
		case string(env.method) == `"eth_subscription"`:
			// The connection carries one subscription, so its id needs no check.
			h, err := parseHeadParams(env.params)
			if err != nil {
				w.log.Debug("remote heads: malformed head", "remote", w.name, "err", err)
				continue
			}
			w.onHead(h)
		}
	}
}

// ping detects a connection that died silently; closing it ends the read.
func (w *headWatcher) ping(ctx context.Context, ws *websocket.Conn) {
	if pingUntil(ctx, ws, w.pingInterval, w.pingTimeout) != nil {
		ws.CloseNow()
	}
}

// parseHeadParams reads the header of an eth_subscription's params.
func parseHeadParams(params []byte) (*headReport, error) {
	var p struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	return parseHeadReport(p.Result)
}

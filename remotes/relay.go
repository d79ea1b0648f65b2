package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/jsonscan"
)

// Relay limits.
const (
	// A remote whose relay failed is passed over while another can relay,
	// and tried again only after a backoff that doubles with each failure
	// in a row (failures less than relayForget apart), from relayBackoffMin
	// to relayBackoffMax: a remote that refuses the subscription, or keeps
	// dropping it, is not redialled every second for as long as clients
	// stay subscribed.
	relayBackoffMin = time.Second
	relayBackoffMax = 30 * time.Second
	relayForget     = 2 * relayBackoffMax
	// relaySubscribeTimeout bounds the wait for the answer to eth_subscribe.
	relaySubscribeTimeout = 10 * time.Second
	// relayMaxMessage caps one relayed message (unless the remote's
	// MaxResponseBytes is lower): a full pending transaction is at most a
	// few hundred KB, and each one is queued for every subscriber.
	relayMaxMessage = 4 << 20
	// relaySubscribeID is the id of the one call sent on a relay connection.
	relaySubscribeID = 1
)

// relayState remembers the remotes whose relay failed lately.
type relayState struct {
	mu     sync.Mutex
	failed map[*Remote]relayFailure
}

// relayFailure is a remote's latest relay failure and how many came in a row.
type relayFailure struct {
	at time.Time
	n  int
}

// retryAt is when the remote may be tried again.
func (f relayFailure) retryAt() time.Time {
	if f.n == 0 {
		return f.at // no failure: now
	}
	d := relayBackoffMin << min(f.n-1, 8)
	return f.at.Add(min(d, relayBackoffMax))
}

func (s *relayState) noteFailure(r *Remote, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = make(map[*Remote]relayFailure)
	}
	f := s.failed[r]
	if now.Sub(f.at) >= relayForget {
		f.n = 0
	}
	s.failed[r] = relayFailure{at: now, n: f.n + 1}
}

// lastFailure is r's latest relay failure, if it was less than relayForget ago.
func (s *relayState) lastFailure(r *Remote, now time.Time) (relayFailure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[r]
	if ok && now.Sub(f.at) >= relayForget {
		delete(s.failed, r)
		return relayFailure{}, false
	}
	return f, ok
}

// relayURL is where the remote serves subscriptions: its ws url, else its
// main url when that is a WebSocket one; "" when it has neither.
func (r *Remote) relayURL() string {
	if r.cfg.WSURL != "" {
		return r.cfg.WSURL
	}
	if u := strings.ToLower(r.cfg.URL); strings.HasPrefix(u, "ws://") || strings.HasPrefix(u, "wss://") {
		return r.cfg.URL
	}
	return ""
}

// CanRelay reports whether some remote can relay subscriptions: one has a
// WebSocket url. Without one there is nothing for Relay to do.
func (p *Pool) CanRelay() bool {
	for _, r := range p.remotes {
		if r.relayURL() != "" {
			return true
		}
	}
	return false
}

// Relay subscribes with eth_subscribe(params) on one remote that has a
// WebSocket url and calls fn with each notification's result, a slice of
// its own, until ctx ends (ctx.Err()) or the connection or subscription
// fails (an error naming the remote, never its url). The remote is the best
// in rotation by tier, then score; one whose relay failed lately is passed
// over while another can relay, so a caller that retries moves on, and
// when none other can, Relay waits out its backoff first. fn runs on the
// reading goroutine: while it blocks, nothing is read.
func (p *Pool) Relay(ctx context.Context, params json.RawMessage, fn func(result json.RawMessage)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, failed, ok := p.pickRelay(p.now())
	if !ok {
		return fmt.Errorf("chain %s: relay: no remote with a ws url is in rotation", p.cfg.Chain)
	}
	if d := failed.retryAt().Sub(p.now()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	err := p.relayFrom(ctx, r, params, fn)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.relay.noteFailure(r, p.now())
	return err
}

// pickRelay chooses the remote to relay from: healthy, not cordoned, with
// a WebSocket url; the first tier, then the lowest score. A remote that
// failed lately comes only when no other can, the one to retry soonest
// first, with its failure.
func (p *Pool) pickRelay(now time.Time) (r *Remote, failed relayFailure, ok bool) {
	var best, avoided *Remote
	for _, c := range p.remotes { // by tier
		if c.relayURL() == "" || !c.healthy(now) || c.cordoned(now) {
			continue
		}
		if f, lately := p.relay.lastFailure(c, now); lately {
			if avoided == nil || f.retryAt().Before(failed.retryAt()) {
				avoided, failed = c, f
			}
			continue
		}
		if best == nil || c.cfg.Tier < best.cfg.Tier || c.cfg.Tier == best.cfg.Tier && c.score() < best.score() {
			best = c
		}
	}
	switch {
	case best != nil:
		return best, relayFailure{}, true
	case avoided != nil:
		return avoided, failed, true
	}
	return nil, relayFailure{}, false
}

// relayFrom runs one subscription on r until ctx ends or it fails. It
// returns after closing its connection and stopping its pinger.
func (p *Pool) relayFrom(ctx context.Context, r *Remote, params json.RawMessage, fn func(json.RawMessage)) error {
	maxBytes := int64(relayMaxMessage)
	if c := r.cfg.MaxResponseBytes; c > 0 && c < maxBytes {
		maxBytes = c
	}
	opts := transportOptions{Name: r.cfg.Name, URL: r.relayURL(), Headers: headerOf(r.cfg.Headers),
		MaxResponseBytes: maxBytes, OtherURLs: []string{r.cfg.URL, r.cfg.WSURL}, Logger: r.log}
	u, err := opts.normalize()
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return fmt.Errorf("remote %s: relay: url: a ws or wss scheme is needed", r.cfg.Name)
	}
	red := opts.redactor()

	dctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	ws, _, err := websocket.Dial(dctx, opts.URL, wsDialOptions(opts))
	cancel()
	if err != nil {
		return failure(ctx, r.cfg.Name, red, "relay dial", err)
	}
	defer ws.CloseNow() // the subscription ends with the connection
	ws.SetReadLimit(maxBytes)

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() {
		// A connection that died silently is closed, ending the read.
		if pingUntil(sctx, ws, wsPingInterval, wsPingTimeout) != nil {
			ws.CloseNow()
		}
	})

	req := appendRequest(nil, relaySubscribeID, "eth_subscribe", params)
	wctx, cancel := context.WithTimeout(sctx, wsWriteTimeout)
	err = ws.Write(wctx, websocket.MessageText, req)
	cancel()
	if err != nil {
		return failure(ctx, r.cfg.Name, red, "relay subscribe", err)
	}

	answerBy := time.Now().Add(relaySubscribeTimeout)
	subscribed := false
	for {
		var data []byte
		if subscribed {
			_, data, err = ws.Read(sctx)
		} else {
			rctx, cancel := context.WithDeadline(sctx, answerBy)
			_, data, err = ws.Read(rctx)
			late := errors.Is(rctx.Err(), context.DeadlineExceeded)
			cancel()
			if err != nil && late && ctx.Err() == nil {
				return fmt.Errorf("remote %s: relay subscribe: no answer within %v: %w",
					r.cfg.Name, relaySubscribeTimeout, ErrTransport)
			}
		}
		if err != nil {
			return failure(ctx, r.cfg.Name, red, "relay read", err)
		}
		env, err := parseEnvelope(data)
		if err != nil {
			r.log.Debug("remote relay: malformed message", "err", err)
			continue
		}
		switch {
		case env.idIs(relaySubscribeID):
			if _, err := env.outcome(r.cfg.Name, red, 0); err != nil {
				return fmt.Errorf("relay subscribe: %w", err)
			}
			subscribed = true
			r.log.Debug("remote relay subscribed")
		case string(env.method) == `"eth_subscription"`:
			// The connection carries one subscription, so its id needs no check.
			res := jsonscan.Member(env.params, "result")
			if res == nil {
				r.log.Debug("remote relay: notification without a result")
				continue
			}
			// A copy: the subscriber queues it, and must not pin the message.
			fn(bytes.Clone(res))
		}
	}
}

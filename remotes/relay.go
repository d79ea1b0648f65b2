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

	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
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
)

// relayState remembers the remotes whose relay failed lately: their
// WebSocket subscriptions and their polled filters (relay_poll.go) apart.
type relayState struct {
	ws, poll relayFailures
}

// relayFailures are the remotes whose relay of one kind failed lately.
type relayFailures struct {
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

func (s *relayFailures) noteFailure(r *Remote, now time.Time) {
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
func (s *relayFailures) lastFailure(r *Remote, now time.Time) (relayFailure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[r]
	if ok && now.Sub(f.at) >= relayForget {
		delete(s.failed, r)
		return relayFailure{}, false
	}
	return f, ok
}

// ErrRelayUnsupported is what Relay's error wraps when no remote of the
// chain can serve the subscription: none with a ws url that has it, and,
// for newPendingTransactions, none with eth_newPendingTransactionFilter.
// It lasts while the remotes are known to lack them (unsupportedTTL). Its
// RelayUnsupported method lets a consumer tell it without importing this
// package.
var ErrRelayUnsupported error = relayUnsupportedError{}

type relayUnsupportedError struct{}

func (relayUnsupportedError) Error() string          { return "no remote serves this subscription" }
func (relayUnsupportedError) RelayUnsupported() bool { return true }

// subscribeKey names one kind of upstream subscription in a remote's
// table of what it lacks: a remote that refused it as an unknown
// subscription is not asked again while that is remembered, as for a
// method. The key is no method name, so it never meets a client's call.
func subscribeKey(params json.RawMessage) string {
	if full, ok := pendingParams(params); ok {
		if full {
			return "eth_subscribe newPendingTransactions true"
		}
		return "eth_subscribe newPendingTransactions"
	}
	return "eth_subscribe " + string(params)
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

// Relays relays clients' subscriptions upstream, from the pool's remotes
// (Pool.Relays).
type Relays struct{ p *Pool }

// Relays is the pool's relay of subscriptions, or nil when no remote may
// relay (canRelay): then there is nothing for Relay to do.
func (p *Pool) Relays() *Relays {
	if !p.canRelay() {
		return nil
	}
	return &Relays{p: p}
}

// canRelay reports whether some remote may relay subscriptions: one has a
// WebSocket url, or may serve pending-transaction filters (its methods
// config allows them) for newPendingTransactions.
func (p *Pool) canRelay() bool {
	for _, r := range p.members() {
		if r.relayURL() != "" || r.configuredFor(pendingFilterMethod) && r.configuredFor(filterChangesMethod) {
			return true
		}
	}
	return false
}

// Relay subscribes with eth_subscribe(params) upstream and calls fn with
// each notification's result, a slice of its own, until ctx ends
// (ctx.Err()) or the upstream subscription fails (an error naming the
// remote, never its url). up is called each time the upstream
// subscription is in place, before its first result.
//
// The subscription goes to one remote that has a WebSocket url, chosen by
// selection as a call at the head is (select.go). One whose relay failed lately is passed
// over while another can relay, so a caller that retries moves on; one
// that refuses the subscription as unknown is passed over at once, and
// while that is remembered (unsupportedTTL). While no WebSocket remote can
// relay (none has a ws url, none is in rotation, each lacks the
// subscription or backs off), newPendingTransactions comes from a
// pending-transaction filter polled over HTTP (relay_poll.go), until a
// WebSocket remote can relay again. When neither can serve it, Relay waits
// out the WebSocket remote's backoff first; when no remote has either, the
// error wraps ErrRelayUnsupported. fn runs on the goroutine that reads (or
// polls): while it blocks, nothing is read.
func (rl *Relays) Relay(ctx context.Context, params json.RawMessage, up func(), fn func(result json.RawMessage)) error {
	p := rl.p
	full, pending := pendingParams(params)
	key := subscribeKey(params)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := p.now()
		r, failed, ok := p.pickRelay(key, now)
		if pending && (!ok || failed.retryAt().After(now)) {
			err := p.pollPending(ctx, full, key, ok, up, fn)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, errYieldToWS):
				continue
			case !errors.Is(err, errNoPoller):
				return err
			case !ok && p.lacksPending(key):
				return fmt.Errorf("chain %s: relay newPendingTransactions: %w: "+
					"no remote with a ws_url has the subscription, none has eth_newPendingTransactionFilter",
					p.conf().Chain, ErrRelayUnsupported)
			case !ok:
				return fmt.Errorf("chain %s: relay: no remote with a ws url or a pending-transaction filter is in rotation", p.conf().Chain)
			}
		}
		if !ok {
			if p.lacksSubscription(key) {
				return fmt.Errorf("chain %s: relay: %w", p.conf().Chain, ErrRelayUnsupported)
			}
			return fmt.Errorf("chain %s: relay: no remote with a ws url is in rotation", p.conf().Chain)
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
		err := p.relayFrom(ctx, r, params, key, up, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.lacks(key) != nil {
			continue // it has no such subscription: the next remote, or a filter
		}
		p.relay.ws.noteFailure(r, p.now())
		return err
	}
}

// lacksSubscription reports whether every remote with a ws url is known to
// lack the subscription key names (and there is one).
func (p *Pool) lacksSubscription(key string) bool {
	some := false
	for _, r := range p.members() {
		if r.relayURL() == "" {
			continue
		}
		if r.lacks(key) == nil {
			return false
		}
		some = true
	}
	return some
}

// pickRelay chooses the remote to relay the subscription key names from:
// one with a WebSocket url, not known to lack it (pickRelayed).
func (p *Pool) pickRelay(key string, now time.Time) (r *Remote, failed relayFailure, ok bool) {
	return p.pickRelayed(&p.relay.ws, now, func(c *Remote) bool { return c.relayURL() != "" && c.lacks(key) == nil })
}

// pickRelayed chooses the remote a relay takes next, among those fits
// admits, through selection (select.go) as for a call at the head: in
// rotation, not lagging, by tier, by score and share, past its budget
// only when no other can. One whose relay of this kind failed lately (fs)
// comes only when no other can, the one to retry soonest first, with its
// failure.
func (p *Pool) pickRelayed(fs *relayFailures, now time.Time, fits func(*Remote) bool) (r *Remote, failed relayFailure, ok bool) {
	v := view{now: now, best: p.healthyBest(now), maxLag: p.conf().MaxLag, allow: outBusy}
	sel := p.selection()
	rt := route{accept: func(c *Remote) bool {
		if !fits(c) {
			return false
		}
		_, lately := fs.lastFailure(c, now)
		return !lately
	}}
	if r, _ := sel.pick(&v, "", &rt, 0); r != nil {
		return r, relayFailure{}, true
	}
	rt.accept = fits
	var tried uint64
	for range len(sel.remotes) { // each turn rules one out
		c, slot := sel.pick(&v, "", &rt, tried)
		if c == nil {
			break
		}
		tried |= 1 << slot
		if f, _ := fs.lastFailure(c, now); r == nil || f.retryAt().Before(failed.retryAt()) {
			r, failed = c, f
		}
	}
	return r, failed, r != nil
}

// relayFrom runs one subscription on r until ctx ends or it fails. It
// returns after closing its connection and stopping its pinger. A remote
// that refuses the subscription as one it does not have is remembered to
// lack key.
func (p *Pool) relayFrom(ctx context.Context, r *Remote, params json.RawMessage, key string, up func(), fn func(json.RawMessage)) error {
	maxBytes := int64(relayMaxMessage)
	if c := r.cfg.MaxResponseBytes; c > 0 && c < maxBytes {
		maxBytes = c
	}
	opts := wire.Options{Name: r.cfg.Name, URL: r.relayURL(), Headers: headerOf(r.cfg.Headers),
		MaxResponseBytes: maxBytes, OtherURLs: []string{r.cfg.URL, r.cfg.WSURL}, Logger: r.log, Bill: r.bill}
	sub, err := wire.NewSubscription("relay", opts, params, wire.SubHooks{
		Subscribed: func() {
			r.log.Debug("remote relay subscribed")
			up()
		},
		Refused: func(err error) {
			if verdict.Classify("eth_subscribe", err).Reason == verdict.ReasonMethodUnsupported {
				r.markUnsupported(key, err)
			}
		},
		// A copy: the subscriber queues it, and must not pin the message.
		Result: func(res json.RawMessage) { fn(bytes.Clone(res)) },
	})
	if err != nil {
		return err
	}
	sub.AnswerWithin = relaySubscribeTimeout
	_, err = sub.Run(ctx)
	return err
}

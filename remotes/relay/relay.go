package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/retry"
)

// Relay limits.
const (
	// A remote whose relay failed is passed over while another can relay,
	// and tried again only after a backoff that doubles with each failure
	// in a row (failures less than backoffForget apart), from backoffMin
	// to backoffMax: a remote that refuses the subscription, or keeps
	// dropping it, is not redialled every second for as long as clients
	// stay subscribed.
	backoffMin    = time.Second
	backoffMax    = 30 * time.Second
	backoffForget = 2 * backoffMax
	// subscribeTimeout bounds the wait for the answer to eth_subscribe.
	subscribeTimeout = 10 * time.Second
	// maxMessage caps one relayed message (unless the remote's own cap is
	// lower): a full pending transaction is at most a few hundred KB, and
	// each one is queued for every subscriber.
	maxMessage = 4 << 20
)

// Pool is the chain's balancer as the relays see it.
type Pool interface {
	// Chain names the chain, for errors.
	Chain() string
	// Now is the pool's clock.
	Now() time.Time
	// PollInterval is how often a pending-transaction filter is polled.
	PollInterval() time.Duration
	// Members are the pool's remotes.
	Members() []Upstream
	// Pick chooses, by the pool's selection as for a call at the head,
	// one of the remotes accept admits, or nil.
	Pick(now time.Time, accept func(Upstream) bool) Upstream
}

// Upstream is one remote of the pool as a relay uses it. Two Upstreams of
// the same remote are equal (==): the backoff is kept per remote.
type Upstream interface {
	Name() string
	Logger() *slog.Logger
	// CanSubscribe reports whether the remote has a WebSocket url.
	CanSubscribe() bool
	// Configured reports whether the remote's config allows method;
	// Supports, whether it also is not known to lack it.
	Configured(method string) bool
	Supports(method string) bool
	// Lacks reports whether the remote is known to lack key (a method, or
	// a subscription's key); MarkUnsupported remembers that it does.
	Lacks(key string) bool
	MarkUnsupported(key string, err error)
	// Call sends one call to the remote.
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Subscribe prepares eth_subscribe(params) on the remote's WebSocket,
	// its messages capped at maxBytes (or the remote's own lower cap).
	Subscribe(params json.RawMessage, maxBytes int64, h wire.SubHooks) (*wire.Subscription, error)
}

// ErrUnsupported is what Relay's error wraps when no remote of the chain
// can serve the subscription: none with a ws url that has it, and, for
// newPendingTransactions, none with eth_newPendingTransactionFilter. It
// lasts while the remotes are known to lack them. Its RelayUnsupported
// method lets a consumer tell it without importing this package.
var ErrUnsupported error = unsupportedError{}

type unsupportedError struct{}

func (unsupportedError) Error() string          { return "no remote serves this subscription" }
func (unsupportedError) RelayUnsupported() bool { return true }

// Relays relays clients' subscriptions upstream, from the pool's remotes.
// It keeps the remotes whose relay failed lately, WebSocket subscriptions
// and polled filters (poll.go) apart.
type Relays struct {
	p        Pool
	ws, poll failures
}

// New is the relays of p.
func New(p Pool) *Relays { return &Relays{p: p} }

// CanRelay reports whether some remote may relay subscriptions: one has a
// WebSocket url, or may serve pending-transaction filters (its methods
// config allows them) for newPendingTransactions.
func (rl *Relays) CanRelay() bool {
	for _, r := range rl.p.Members() {
		if r.CanSubscribe() || r.Configured(pendingFilterMethod) && r.Configured(filterChangesMethod) {
			return true
		}
	}
	return false
}

// failures are the remotes whose relay of one kind failed lately.
type failures struct {
	mu     sync.Mutex
	failed map[Upstream]failure
}

// failure is a remote's latest relay failure and how many came in a row.
type failure struct {
	at time.Time
	n  int
}

// retryAt is when the remote may be tried again.
func (f failure) retryAt() time.Time {
	if f.n == 0 {
		return f.at // no failure: now
	}
	d := backoffMin << min(f.n-1, 8)
	return f.at.Add(min(d, backoffMax))
}

func (s *failures) note(r Upstream, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = make(map[Upstream]failure)
	}
	f := s.failed[r]
	if now.Sub(f.at) >= backoffForget {
		f.n = 0
	}
	s.failed[r] = failure{at: now, n: f.n + 1}
}

// last is r's latest relay failure, if it was less than backoffForget ago.
func (s *failures) last(r Upstream, now time.Time) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failed[r]
	if ok && now.Sub(f.at) >= backoffForget {
		delete(s.failed, r)
		return failure{}, false
	}
	return f, ok
}

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

// Relay subscribes with eth_subscribe(params) upstream and calls fn with
// each notification's result, a slice of its own, until ctx ends
// (ctx.Err()) or the upstream subscription fails (an error naming the
// remote, never its url). up is called each time the upstream
// subscription is in place, before its first result.
//
// The subscription goes to one remote that has a WebSocket url, chosen by
// the pool's selection as a call at the head is. One whose relay failed
// lately is passed over while another can relay, so a caller that
// retries moves on; one that refuses the subscription as unknown is
// passed over at once, and while that is remembered. While no WebSocket
// remote can relay (none has a ws url, none is in rotation, each lacks
// the subscription or backs off), newPendingTransactions comes from a
// pending-transaction filter polled over HTTP (poll.go), until a
// WebSocket remote can relay again. When neither can serve it, Relay
// waits out the WebSocket remote's backoff first; when no remote has
// either, the error wraps ErrUnsupported. fn runs on the goroutine that
// reads (or polls): while it blocks, nothing is read.
func (rl *Relays) Relay(ctx context.Context, params json.RawMessage, up func(), fn func(result json.RawMessage)) error {
	p := rl.p
	full, pending := pendingParams(params)
	key := subscribeKey(params)
	ws := rl.wsPicker(key)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		now := p.Now()
		r, failed, ok := ws.pick(now)
		if pending && (!ok || failed.retryAt().After(now)) {
			err := rl.pollPending(ctx, ws, full, ok, up, fn)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(err, errYieldToWS):
				continue
			case !errors.Is(err, errNoPoller):
				return err
			case !ok && rl.lacksPending(key):
				return fmt.Errorf("chain %s: relay newPendingTransactions: %w: "+
					"no remote with a ws_url has the subscription, none has eth_newPendingTransactionFilter",
					p.Chain(), ErrUnsupported)
			case !ok:
				return fmt.Errorf("chain %s: relay: no remote with a ws url or a pending-transaction filter is in rotation", p.Chain())
			}
		}
		if !ok {
			if rl.lacksSubscription(key) {
				return fmt.Errorf("chain %s: relay: %w", p.Chain(), ErrUnsupported)
			}
			return fmt.Errorf("chain %s: relay: no remote with a ws url is in rotation", p.Chain())
		}
		if d := failed.retryAt().Sub(p.Now()); d > 0 && !retry.Sleep(ctx, d) {
			return ctx.Err()
		}
		err := from(ctx, r, params, key, up, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.Lacks(key) {
			continue // it has no such subscription: the next remote, or a filter
		}
		rl.ws.note(r, p.Now())
		return err
	}
}

// lacksSubscription reports whether every remote with a ws url is known to
// lack the subscription key names (and there is one).
func (rl *Relays) lacksSubscription(key string) bool {
	some := false
	for _, r := range rl.p.Members() {
		if !r.CanSubscribe() {
			continue
		}
		if !r.Lacks(key) {
			return false
		}
		some = true
	}
	return some
}

// picker chooses the remotes of one kind (WebSocket subscriptions, or
// filters) for one Relay run, through the pool's selection. It is made
// once per run, its filters with it, so that a pick, which runs at each
// poll, allocates nothing; it is not safe for concurrent use.
type picker struct {
	p     Pool
	fs    *failures // the remotes whose relay of this kind failed lately
	fits  func(Upstream) bool
	now   time.Time
	tried []Upstream
	// fresh admits the remotes fits admits whose relay did not fail
	// lately; untried, those fits admits not yet tried.
	fresh, untried func(Upstream) bool
}

func newPicker(p Pool, fs *failures, fits func(Upstream) bool) *picker {
	pk := &picker{p: p, fs: fs, fits: fits}
	pk.fresh = func(c Upstream) bool {
		if !pk.fits(c) {
			return false
		}
		_, lately := pk.fs.last(c, pk.now)
		return !lately
	}
	pk.untried = func(c Upstream) bool {
		for _, t := range pk.tried {
			if t == c {
				return false
			}
		}
		return pk.fits(c)
	}
	return pk
}

// wsPicker picks the remote to relay the subscription key names from: one
// with a WebSocket url, not known to lack it.
func (rl *Relays) wsPicker(key string) *picker {
	return newPicker(rl.p, &rl.ws, func(c Upstream) bool { return c.CanSubscribe() && !c.Lacks(key) })
}

// pollPicker picks the remote to make a filter on: one not known to lack
// the filter methods.
func (rl *Relays) pollPicker() *picker { return newPicker(rl.p, &rl.poll, canPoll) }

// pick chooses the remote a relay takes next, among those fits admits,
// through the pool's selection as for a call at the head. One whose relay
// of this kind failed lately comes only when no other can, the one to
// retry soonest first, with its failure.
func (pk *picker) pick(now time.Time) (r Upstream, failed failure, ok bool) {
	pk.now = now
	if r := pk.p.Pick(now, pk.fresh); r != nil {
		return r, failure{}, true
	}
	pk.tried = pk.tried[:0]
	for range len(pk.p.Members()) { // each turn rules one out
		c := pk.p.Pick(now, pk.untried)
		if c == nil {
			break
		}
		pk.tried = append(pk.tried, c)
		if f, _ := pk.fs.last(c, now); r == nil || f.retryAt().Before(failed.retryAt()) {
			r, failed = c, f
		}
	}
	clear(pk.tried) // holds no remote past the pick
	return r, failed, r != nil
}

// from runs one subscription on r until ctx ends or it fails. It returns
// after closing its connection and stopping its pinger. A remote that
// refuses the subscription as one it does not have is remembered to lack
// key.
func from(ctx context.Context, r Upstream, params json.RawMessage, key string, up func(), fn func(json.RawMessage)) error {
	sub, err := r.Subscribe(params, maxMessage, wire.SubHooks{
		Subscribed: func() {
			r.Logger().Debug("remote relay subscribed")
			up()
		},
		Refused: func(err error) {
			if verdict.Classify("eth_subscribe", err).Reason == verdict.ReasonMethodUnsupported {
				r.MarkUnsupported(key, err)
			}
		},
		// A copy: the subscriber queues it, and must not pin the message.
		Result: func(res json.RawMessage) { fn(bytes.Clone(res)) },
	})
	if err != nil {
		return err
	}
	sub.AnswerWithin = subscribeTimeout
	_, err = sub.Run(ctx)
	return err
}

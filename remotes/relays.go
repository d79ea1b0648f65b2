package remotes

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/relay"
	"github.com/venn-gateway/venn/remotes/wire"
)

// The pool as its relays of subscriptions (remotes/relay) see it: its
// members, its selection and clock, and each remote's call and
// subscribe.

// Relays is the pool's relay of subscriptions, or nil when no remote may
// relay (relay.Relays.CanRelay): then there is nothing for Relay to do.
func (p *Pool) Relays() *relay.Relays {
	if !p.relays.CanRelay() {
		return nil
	}
	return p.relays
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

// relayHost is the pool as relay.Pool.
type relayHost struct{ p *Pool }

var _ relay.Pool = relayHost{}

func (rp relayHost) Chain() string  { return rp.p.conf().Chain }
func (rp relayHost) Now() time.Time { return rp.p.now() }

func (rp relayHost) PollInterval() time.Duration {
	if d := rp.p.conf().PendingPollInterval; d > 0 {
		return d
	}
	return relay.DefaultPollInterval
}

func (rp relayHost) Members() []relay.Upstream {
	ms := rp.p.members()
	us := make([]relay.Upstream, len(ms))
	for i, r := range ms {
		us[i] = relayRemote{r}
	}
	return us
}

// Pick is selection (select.go) as for a call at the head: in rotation
// but for what passes with calls (outBusy), not lagging, by tier, by
// score and share, past its budget only when no other can.
func (rp relayHost) Pick(now time.Time, accept func(relay.Upstream) bool) relay.Upstream {
	p := rp.p
	v := view{now: now, best: p.healthyBest(now), maxLag: p.conf().MaxLag, allow: outBusy}
	rt := route{accept: func(c *Remote) bool { return accept(relayRemote{c}) }}
	if r, _ := p.selection().pick(&v, "", &rt, 0); r != nil {
		return relayRemote{r}
	}
	return nil
}

// relayRemote is a remote as relay.Upstream; two of one remote are equal.
type relayRemote struct{ r *Remote }

var _ relay.Upstream = relayRemote{}

func (u relayRemote) Name() string                          { return u.r.cfg.Name }
func (u relayRemote) Logger() *slog.Logger                  { return u.r.log }
func (u relayRemote) CanSubscribe() bool                    { return u.r.relayURL() != "" }
func (u relayRemote) Configured(method string) bool         { return u.r.configuredFor(method) }
func (u relayRemote) Supports(method string) bool           { return u.r.supports(method) }
func (u relayRemote) Lacks(key string) bool                 { return u.r.lacks(key) != nil }
func (u relayRemote) MarkUnsupported(key string, err error) { u.r.markUnsupported(key, err) }

func (u relayRemote) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return u.r.call(ctx, method, params)
}

func (u relayRemote) Subscribe(params json.RawMessage, maxBytes int64, h wire.SubHooks) (*wire.Subscription, error) {
	r := u.r
	if c := r.cfg.MaxResponseBytes; c > 0 && c < maxBytes {
		maxBytes = c
	}
	opts := wire.Options{Name: r.cfg.Name, URL: r.relayURL(), Headers: headerOf(r.cfg.Headers),
		MaxResponseBytes: maxBytes, OtherURLs: []string{r.cfg.URL, r.cfg.WSURL}, Logger: r.log, Bill: r.bill}
	return wire.NewSubscription("relay", opts, params, h)
}

package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/jsonscan"
)

// NotificationMethod is the method a subscription's notification carries.
const NotificationMethod = "eth_subscription"

// subscribeID is the id of the one call sent on a subscription's connection.
const subscribeID = 1

// Subscription is one eth_subscribe upstream on a WebSocket connection of
// its own, the session both the newHeads follower (remotes/heads) and the
// relay of a client's subscription (remotes/relay) run: each run dials,
// subscribes, hands over the notifications until the connection fails or
// ctx ends, and returns after closing the connection and stopping its
// pinger. Redialling is the caller's: it decides the backoff, and whether
// what answers the new connection is still to be trusted (chaincheck.go).
//
// The connection carries this one subscription, so a notification's
// subscription id needs no check. The hooks run on the reading goroutine:
// while one blocks, pongs are not read, and a block longer than the ping
// timeout costs the connection.
type Subscription struct {
	what     string // "heads", "relay": names the session in errors and logs
	name     string
	url      string // never in an error or log
	params   json.RawMessage
	red      *Redactor
	maxBytes int64
	dialOpts *websocket.DialOptions
	log      *slog.Logger
	hooks    SubHooks
	bill     func(method string) // nil: not billed

	// AnswerWithin bounds the wait for the answer to eth_subscribe; zero
	// waits as long as the connection lives. The timings are fields so
	// that tests can shorten them.
	AnswerWithin              time.Duration
	pingInterval, pingTimeout time.Duration
}

// SubHooks are what a Subscription tells its owner. Any may be nil.
type SubHooks struct {
	// subscribed runs each time the remote confirms the subscription,
	// before its first notification.
	Subscribed func()
	// refused runs with the remote's error answer to eth_subscribe; the
	// run then ends with it.
	Refused func(error)
	// result runs with each notification's result. It aliases the message
	// read: a result kept must be copied.
	Result func(json.RawMessage)
}

// NewSubscription prepares eth_subscribe(params) on opts.URL, a ws(s)
// URL; it does no I/O. Its errors name the remote, never the URL.
func NewSubscription(what string, opts Options, params json.RawMessage, h SubHooks) (*Subscription, error) {
	u, err := opts.normalize()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return nil, fmt.Errorf("remote %s: %s: url: a ws or wss scheme is needed", opts.Name, what)
	}
	return &Subscription{
		what:         what,
		name:         opts.Name,
		url:          opts.URL,
		params:       params,
		red:          opts.Redactor(),
		maxBytes:     opts.MaxResponseBytes,
		dialOpts:     wsDialOptions(opts),
		log:          opts.Logger,
		hooks:        h,
		bill:         opts.Bill,
		pingInterval: wsPingInterval,
		pingTimeout:  wsPingTimeout,
	}, nil
}

// Logger is the subscription's logger (Options.Logger, or one that
// discards).
func (s *Subscription) Logger() *slog.Logger { return s.log }

// Run is one session: it returns when the subscription was last confirmed
// (zero if never) and why the session ended, an error naming the remote.
func (s *Subscription) Run(ctx context.Context) (subscribed time.Time, err error) {
	dctx, cancel := context.WithTimeout(ctx, wsDialTimeout)
	ws, _, err := websocket.Dial(dctx, s.url, s.dialOpts)
	cancel()
	if err != nil {
		return time.Time{}, failure(ctx, s.name, s.red, s.what+" dial", err)
	}
	defer ws.CloseNow() // the subscription ends with the connection
	ws.SetReadLimit(s.maxBytes)

	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { s.ping(sctx, ws) })

	req := appendRequest(nil, subscribeID, "eth_subscribe", s.params)
	if s.bill != nil {
		s.bill("eth_subscribe")
	}
	wctx, cancel := context.WithTimeout(sctx, wsWriteTimeout)
	err = ws.Write(wctx, websocket.MessageText, req)
	cancel()
	if err != nil {
		return time.Time{}, failure(ctx, s.name, s.red, s.what+" subscribe", err)
	}
	return s.read(ctx, sctx, ws)
}

// read hands over what the connection brings until it fails. ctx is the
// run's, sctx the connection's (ended with it).
func (s *Subscription) read(ctx, sctx context.Context, ws *websocket.Conn) (subscribed time.Time, err error) {
	answerBy := time.Now().Add(s.AnswerWithin)
	for {
		data, err := s.next(ctx, sctx, ws, subscribed.IsZero(), answerBy)
		if err != nil {
			return subscribed, err
		}
		env, err := parseEnvelope(data)
		if err != nil {
			s.log.Debug("remote "+s.what+": malformed message", "err", err)
			continue
		}
		switch {
		case env.idIs(subscribeID):
			if _, err := env.outcome(s.name, s.red, 0); err != nil {
				if s.hooks.Refused != nil {
					s.hooks.Refused(err)
				}
				return subscribed, fmt.Errorf("%s subscribe: %w", s.what, err)
			}
			subscribed = time.Now()
			if s.hooks.Subscribed != nil {
				s.hooks.Subscribed()
			}
		case string(env.method) == `"eth_subscription"`:
			if s.bill != nil {
				s.bill(NotificationMethod) // received, so billed, whatever it holds
			}
			res := jsonscan.Member(env.params, "result")
			if res == nil {
				s.log.Debug("remote " + s.what + ": notification without a result")
				continue
			}
			if s.hooks.Result != nil {
				s.hooks.Result(res)
			}
		}
	}
}

// next reads one message. Until the subscription is confirmed (waiting),
// the read ends by answerBy when AnswerWithin bounds it.
func (s *Subscription) next(ctx, sctx context.Context, ws *websocket.Conn, waiting bool, answerBy time.Time) ([]byte, error) {
	rctx := sctx
	if waiting && s.AnswerWithin > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(sctx, answerBy)
		defer cancel()
	}
	_, data, err := ws.Read(rctx)
	if err == nil {
		return data, nil
	}
	if rctx != sctx && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("remote %s: %s subscribe: no answer within %v: %w",
			s.name, s.what, s.AnswerWithin, ErrTransport)
	}
	return nil, failure(ctx, s.name, s.red, s.what+" read", err)
}

// ping detects a connection that died silently; closing it ends the read.
func (s *Subscription) ping(ctx context.Context, ws *websocket.Conn) {
	if pingUntil(ctx, ws, s.pingInterval, s.pingTimeout) != nil {
		ws.CloseNow()
	}
}

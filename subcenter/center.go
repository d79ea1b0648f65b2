// Package subcenter serves eth_subscribe from a replica's head window:
// newHeads and logs (with geth's removed logs on a reorg) to WebSocket
// clients, newPendingTransactions relayed from a remote, and syncing. No
// client subscription costs an upstream one, and every replica serves the
// same notifications, because every replica follows the same feed.
//
// One dispatcher per chain compares the window's canonical chain with the
// chain it last delivered: whatever the window went through (a new head, a
// reorg, a reload after a break in the feed, a new leader), subscribers
// get each canonical block once, in order, and the logs of every block
// that left the chain again with removed: true. A header the leader
// announced ahead of its block (package headstore, header.go) is told to
// newHeads subscribers at once when it extends the chain told, and not
// again when its block reaches the window; its logs wait for the block.
// A header told whose block never comes is like a block a reorg dropped:
// the block the window gets at its number is told. A delivered block leaves
// only when the window shows what replaced it: a window rebuilt from
// scratch (Redis lost the feed) is short for a while, and a block above
// its top is not gone, only not back yet. Each subscription gets removed
// logs only for logs it was sent. Each connection has a bounded queue; a
// client that cannot keep up is disconnected, never waited for. Every
// goroutine the Center starts (connection writers, the forgetting of a
// closed connection, relays) ends with it: Stop, or the end of Run, waits
// for them.
//
// It must not link go-redis: the filters and the pending feed a cluster
// shares in Redis are its redisstore subpackage's.
package subcenter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// The close code and reason a client too slow for its queue sees.
const (
	closeSlow  = 1008 // policy violation
	slowReason = "subscriber too slow: notification queue full"
)

const pendingKind = "newPendingTransactions"

// Options configure a chain's Center; zero fields take jrpc's defaults
// for the limits of the same names.
type Options struct {
	MaxPerConn int   // subscriptions per connection (max_subscriptions_per_connection)
	QueueLen   int   // notifications waiting per connection (subscription_queue)
	QueueBytes int64 // bytes waiting per connection (subscription_queue_bytes)
	// RelayStartWait bounds how long the first eth_subscribe of relayed
	// newPendingTransactions waits for the upstream to start (0:
	// DefaultRelayStartWait).
	RelayStartWait time.Duration
	// What logs filters may hold: an idle subscriber's filters stay in
	// memory as long as its connection.
	MaxAddresses   int   // addresses in one filter (max_filter_addresses)
	MaxTopics      int   // alternatives at one topic position (max_filter_topics)
	MaxFilterBytes int64 // filter JSON per connection (max_filter_bytes_per_connection)
}

// Relay streams the results of an upstream subscription for params (a
// remote's eth_subscribe, or a filter polled in its stead) to fn until
// ctx ends or the upstream fails; up is called each time the upstream is
// in place. It is how newPendingTransactions reaches clients: venn has no
// mempool of its own. When no remote can serve the subscription at all,
// its error has a method RelayUnsupported() bool that returns true
// (remotes/relay's ErrUnsupported).
type Relay interface {
	Relay(ctx context.Context, params json.RawMessage, up func(), fn func(result json.RawMessage)) error
}

// Center serves one chain's subscriptions.
type Center struct {
	chain string
	w     *headstore.Window
	relay Relay                   // nil: no remote can relay pending transactions
	opts  atomic.Pointer[Options] // swapped whole by SetLimits
	log   *slog.Logger
	m     chainMetrics

	// ctx ends when the Center stops; what crew runs ends with it.
	ctx    context.Context
	cancel context.CancelFunc
	crew   crew

	mu      sync.Mutex
	stopped bool // Stop began: no new subscription
	conns   map[jrpc.Notifier]*conn
	heads   map[*sub]struct{}
	logs    logIndex
	pending map[string]*relayGroup // by the upstream params

	// deliveries counts the window changes delivered; a subscription keeps
	// the count it started at, and each told block the one that sent it.
	// Guarded by mu.
	deliveries uint64

	// The dispatcher's own: the chain subscribers have been told,
	// ascending, contiguous and parent-linked, at most the window's size.
	// It runs ahead of the window while a rebuilt window grows back.
	view []toldBlock
	// ready is the connections a delivery started, to be written.
	ready []*conn
	// told is the head of view, for anyone to read (0: none yet).
	told atomic.Uint64
	// early is the headers told ahead of their blocks (the window's
	// announced headers, dispatch.go), above the view, ascending and each
	// linked to the one below it or to the view's head.
	early []earlyHead
	// toldAhead is the hashes of the last maxEarly headers told ahead:
	// none is told twice.
	toldAhead []string
}

// toldBlock is a block of the chain subscribers were told.
type toldBlock struct {
	*evm.Parts
	// at is the delivery that sent it: only subscriptions older than that
	// got its logs. 0: the chain the dispatcher started from, sent to none.
	at uint64
}

// sub is one subscription.
type sub struct {
	id     string
	kind   kind
	c      *conn
	filter *logFilter      // logs
	group  *relayGroup     // newPendingTransactions
	gone   atomic.Bool     // unsubscribed
	params json.RawMessage // newPendingTransactions: the upstream params
	since  uint64          // Center.deliveries when it started
	// resume is where a resuming subscriber stands (nil: it does not).
	resume *headstore.Cursor
	// resumed: every block the dispatcher told counts as given to it
	// (for removed logs), before it lost its connection or in the replay.
	resumed bool
	// upTo skips live blocks up to it: a resume point above the chain told.
	upTo uint64
}

type kind uint8

const (
	kindHeads kind = iota
	kindLogs
	kindPending
	kindSyncing
	numKinds
)

func (k kind) String() string {
	return [...]string{"newHeads", "logs", pendingKind, "syncing"}[k]
}

// New returns the Center of chain, serving from w. relay may be nil.
func New(chain string, w *headstore.Window, relay Relay, opts Options, log *slog.Logger, m *Metrics) *Center {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Center{
		chain:   chain,
		w:       w,
		relay:   relay,
		log:     log.With("chain", chain),
		m:       m.forChain(chain),
		ctx:     ctx,
		cancel:  cancel,
		conns:   map[jrpc.Notifier]*conn{},
		heads:   map[*sub]struct{}{},
		logs:    newLogIndex(),
		pending: map[string]*relayGroup{},
	}
	opts = opts.withDefaults()
	c.opts.Store(&opts)
	return c
}

// Run dispatches the window's changes to subscribers until ctx ends, then
// stops the Center (Stop).
func (c *Center) Run(ctx context.Context) {
	defer c.Stop()
	for {
		changed, announced := c.w.Changed(), c.w.Announced()
		c.sync()
		c.tellAhead()
		select {
		case <-changed:
		case <-announced:
		case <-ctx.Done():
			return
		}
	}
}

// Stop ends every goroutine the Center started and waits for them: the
// relays, each connection's writer, and the forgetting of closed ones. A
// subscribe after it is refused. Run stops the Center when its ctx ends; a Center
// used without Run must be stopped by its user.
func (c *Center) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.crew.stop()
}

// errors a subscriber sees, as geth words them (errors.go).
var (
	errNotifications error = &unservedError{msg: "notifications not supported"}
	errNotFound      error = &plainError{msg: "subscription not found"}
	errStopped       error = stoppedError{}
)

// Subscribe serves eth_subscribe. The result is the subscription id; the
// first notification leaves only after it.
func (c *Center) Subscribe(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	n, ok := jrpc.NotifierFromContext(ctx)
	if !ok {
		return nil, errNotifications
	}
	var args []json.RawMessage
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return nil, invalidParams("expected subscription name as first argument")
	}
	var name string
	if err := json.Unmarshal(args[0], &name); err != nil {
		return nil, invalidParams("expected subscription name as first argument")
	}
	s := &sub{id: newID()}
	switch name {
	case "newHeads":
		s.kind = kindHeads
		if len(args) > 1 {
			cur, err := parseResume(args[1])
			switch {
			case len(args) > 2 || errors.Is(err, errNotResume):
				return nil, invalidParams("too many arguments, want at most 1")
			case err != nil:
				return nil, invalidParams("invalid argument 1: " + err.Error())
			}
			s.resume = cur
		}
	case "syncing":
		s.kind = kindSyncing
		if len(args) > 1 {
			return nil, invalidParams("too many arguments, want at most 1")
		}
	case "logs":
		s.kind = kindLogs
		switch {
		case len(args) < 2:
			return nil, invalidParams("missing value for required argument 1")
		case len(args) > 2:
			cur, err := parseResume(args[2])
			switch {
			case len(args) > 3 || errors.Is(err, errNotResume):
				return nil, invalidParams("too many arguments, want at most 2")
			case err != nil:
				return nil, invalidParams("invalid argument 2: " + err.Error())
			}
			s.resume = cur
		}
		o := c.options() // one load: a reload may swap them
		f, err := parseLogFilter(args[1], filterLimits{addresses: o.MaxAddresses, topics: o.MaxTopics})
		var le *limitError
		switch {
		case errors.As(err, &le):
			return nil, le
		case err != nil:
			return nil, invalidParams("invalid argument 1: " + err.Error())
		}
		s.filter = f
	case pendingKind:
		s.kind = kindPending
		if len(args) > 2 {
			return nil, invalidParams("too many arguments, want at most 2")
		}
		if c.relay == nil {
			return nil, errPendingUnserved
		}
		s.params = json.RawMessage(`["` + pendingKind + `"]`)
		if len(args) == 2 && string(args[1]) == "true" {
			s.params = json.RawMessage(`["` + pendingKind + `",true]`)
		}
	default:
		return nil, &unservedError{msg: strconv.Quote(name) + " is not a subscription venn serves: " +
			"newHeads, logs, newPendingTransactions and syncing are"}
	}
	cn, err := c.add(n, s)
	if err != nil {
		return nil, err
	}
	if s.kind == kindPending {
		if err := c.awaitPending(ctx, s); err != nil {
			return nil, err
		}
	}
	if s.kind == kindSyncing {
		// A replica serves only a synced chain.
		cn.push(s, []byte("false"))
	}
	if !jrpc.AfterReply(ctx, cn.release) {
		cn.release()
	}
	return json.RawMessage(`"` + s.id + `"`), nil
}

// add registers s on n's connection, held until its reply is written.
func (c *Center) add(n jrpc.Notifier, s *sub) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, errStopped
	}
	cn := c.conns[n]
	if cn == nil {
		cn = newConn(c, n)
		c.conns[n] = cn
		// No goroutine waits for the close: 10,000 idle subscribers would
		// hold 10,000 stacks.
		n.AfterClose(func() { c.crew.Go(func() { c.forget(cn) }) }) // refused once the Center stopped
	}
	o := c.options()
	if len(cn.subs) >= o.MaxPerConn {
		return nil, &limitError{msg: "too many subscriptions on this connection: " +
			"max_subscriptions_per_connection (" + strconv.Itoa(o.MaxPerConn) + ") reached"}
	}
	if s.kind == kindLogs {
		if held := cn.filterBytes + s.filter.size; held > o.MaxFilterBytes {
			return nil, &limitError{msg: fmt.Sprintf(
				"logs filters on this connection would take %d bytes: max_filter_bytes_per_connection (%d) reached",
				held, o.MaxFilterBytes)}
		}
		cn.filterBytes += s.filter.size
		c.m.filterBytes.Add(float64(s.filter.size))
	}
	s.c = cn
	s.since = c.deliveries
	cn.hold()
	if s.resume != nil {
		if err := c.resumeLocked(s, *s.resume); err != nil {
			cn.release()
			if s.kind == kindLogs {
				cn.filterBytes -= s.filter.size
				c.m.filterBytes.Sub(float64(s.filter.size))
			}
			return nil, err
		}
	}
	cn.subs[s.id] = s
	c.m.subs[s.kind].Inc()
	switch s.kind {
	case kindHeads:
		c.heads[s] = struct{}{}
	case kindLogs:
		c.logs.add(s)
	case kindPending:
		c.joinRelayLocked(s)
	}
	return cn, nil
}

// forget forgets cn's subscriptions once its connection closed.
func (c *Center) forget(cn *conn) {
	c.mu.Lock()
	c.dropLocked(cn)
	c.mu.Unlock()
}

// Unsubscribe serves eth_unsubscribe: true, or geth's "subscription not
// found" for an id this connection does not hold.
func (c *Center) Unsubscribe(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var args []json.RawMessage
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return nil, invalidParams("missing value for required argument 0")
	}
	if len(args) > 1 {
		return nil, invalidParams("too many arguments, want at most 1")
	}
	var id string
	if err := json.Unmarshal(args[0], &id); err != nil {
		return nil, invalidParams("invalid argument 0: subscription id must be a string")
	}
	n, ok := jrpc.NotifierFromContext(ctx)
	if !ok {
		return nil, errNotFound
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cn := c.conns[n]
	if cn == nil {
		return nil, errNotFound
	}
	s := cn.subs[strings.ToLower(id)]
	if s == nil {
		return nil, errNotFound
	}
	c.removeLocked(s)
	return json.RawMessage("true"), nil
}

// newID is a subscription id as geth makes them: 16 random bytes as a hex
// quantity.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := strings.TrimLeft(hex.EncodeToString(b[:]), "0")
	if id == "" {
		id = "0"
	}
	return "0x" + id
}

// Subscribers is the number of connections with a subscription, for
// status output.
func (c *Center) Subscribers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

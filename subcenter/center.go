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
// that left the chain again with removed: true. A delivered block leaves
// only when the window shows what replaced it: a window rebuilt from
// scratch (Redis lost the feed) is short for a while, and a block above
// its top is not gone, only not back yet. Each subscription gets removed
// logs only for logs it was sent. Each connection has a bounded queue; a
// client that cannot keep up is disconnected, never waited for. Every
// goroutine the Center starts (connection writers and close watchers,
// relays) ends with it: Stop, or the end of Run, waits for them.
package subcenter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
// (remotes.ErrRelayUnsupported).
type Relay interface {
	Relay(ctx context.Context, params json.RawMessage, up func(), fn func(result json.RawMessage)) error
}

// Center serves one chain's subscriptions.
type Center struct {
	chain string
	w     *headstore.Window
	relay Relay // nil: no remote can relay pending transactions
	opts  Options
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
	// told is the head of view, for anyone to read (0: none yet).
	told atomic.Uint64
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
	if opts.MaxPerConn <= 0 {
		opts.MaxPerConn = jrpc.DefaultMaxSubscriptions
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = jrpc.DefaultSubscriptionQueue
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = jrpc.DefaultSubscriptionQueueBytes
	}
	if opts.RelayStartWait <= 0 {
		opts.RelayStartWait = DefaultRelayStartWait
	}
	if opts.MaxAddresses <= 0 {
		opts.MaxAddresses = jrpc.DefaultMaxFilterAddresses
	}
	if opts.MaxTopics <= 0 {
		opts.MaxTopics = jrpc.DefaultMaxFilterTopics
	}
	if opts.MaxFilterBytes <= 0 {
		opts.MaxFilterBytes = jrpc.DefaultMaxFilterBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Center{
		chain:   chain,
		w:       w,
		relay:   relay,
		opts:    opts,
		log:     log.With("chain", chain),
		m:       m.forChain(chain),
		ctx:     ctx,
		cancel:  cancel,
		conns:   map[jrpc.Notifier]*conn{},
		heads:   map[*sub]struct{}{},
		logs:    newLogIndex(),
		pending: map[string]*relayGroup{},
	}
}

// Run dispatches the window's changes to subscribers until ctx ends, then
// stops the Center (Stop).
func (c *Center) Run(ctx context.Context) {
	defer c.Stop()
	for {
		changed := c.w.Changed()
		c.sync()
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// Stop ends every goroutine the Center started and waits for them: the
// relays, and each connection's writer and close watcher. A subscribe
// after it is refused. Run stops the Center when its ctx ends; a Center
// used without Run must be stopped by its user.
func (c *Center) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.crew.stop()
}

// sync delivers the difference between the chain subscribers were told and
// the window's.
func (c *Center) sync() {
	canon := c.w.Canonical()
	if len(canon) == 0 {
		return // a window being rebuilt from nothing proves nothing yet
	}
	if c.view == nil {
		// The first chain seen is where subscribers start.
		c.view = make([]toldBlock, len(canon))
		for i, p := range canon {
			c.view[i] = toldBlock{Parts: p}
		}
		c.told.Store(canon[len(canon)-1].Number)
		return
	}
	fork := forkPoint(c.view, canon)
	dropped, kept := c.view[fork:], c.view[:fork]
	added, missed := above(kept, canon)
	if missed > 0 {
		c.m.gaps.Add(float64(missed))
		c.log.Warn("subscribers missed blocks: the window moved past more than it keeps",
			"blocks", missed, "resumed_at", added[0].Number)
		kept = nil // the view stays contiguous: it restarts at the window
	}
	if len(dropped) == 0 && len(added) == 0 {
		return // nothing new, or a rebuilt window still below the chain told
	}
	start := time.Now()
	at := c.deliver(dropped, added)
	c.m.dispatch.Observe(time.Since(start).Seconds())

	view := make([]toldBlock, 0, len(kept)+len(added))
	view = append(view, kept...)
	for _, p := range added {
		view = append(view, toldBlock{Parts: p, at: at})
	}
	if n := c.w.Size(); len(view) > n {
		view = view[len(view)-n:]
	}
	c.view = view
	c.told.Store(view[len(view)-1].Number)
}

// forkPoint is the index in view (the chain told, ascending) of the lowest
// block the window (canon, ascending) proves left the chain: another block
// at its number, or below it one that is not its parent, or above it one
// whose parent it is not. Every told block above that one left with it.
// A told block the window does not reach proves nothing: above a window
// being rebuilt it is not back yet; below the window it is settled. With
// none proven gone, forkPoint is len(view).
func forkPoint(view []toldBlock, canon []*evm.Parts) int {
	low, top := canon[0].Number, canon[len(canon)-1].Number
	for i, v := range view {
		switch n := v.Number; {
		case n >= low && n <= top:
			if canon[n-low].Hash != v.Hash {
				return i
			}
		case n+1 == low:
			if canon[0].Parent != v.Hash {
				return i
			}
		case n == top+1:
			if canon[len(canon)-1].Hash != v.Parent {
				return i
			}
		}
	}
	return len(view)
}

// above is what of canon comes after kept, the part of the chain told that
// is still canonical: the canonical blocks above its head, ascending (none
// while a rebuilt window is still below it), and how many blocks between
// them the window no longer holds.
func above(kept []toldBlock, canon []*evm.Parts) (added []*evm.Parts, missed uint64) {
	low, top := canon[0].Number, canon[len(canon)-1].Number
	next := low
	if len(kept) > 0 {
		next = kept[len(kept)-1].Number + 1
	}
	if next < low {
		missed = low - next
		next = low
	}
	if next > top {
		return nil, 0
	}
	return canon[next-low:], missed
}

// deliver queues the notifications of one change: the logs of dropped
// blocks again, removed, to the subscriptions they were sent to, then each
// added block's head and logs. It returns the change's delivery number.
func (c *Center) deliver(dropped []toldBlock, added []*evm.Parts) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliveries++
	var slow []*conn
	push := func(s *sub, payload []byte) {
		if !s.c.push(s, payload) {
			slow = append(slow, s.c)
		}
	}
	if c.logs.n > 0 {
		for _, b := range dropped {
			for i := range b.Logs {
				l := &b.Logs[i]
				var removed []byte // built once, for the first match
				c.logs.match(l, b.Number, func(s *sub) {
					if s.since >= b.at {
						return // it started after this block was sent
					}
					if removed == nil {
						removed = removedLog(l.Raw)
					}
					push(s, removed)
				})
			}
		}
	}
	for _, b := range added {
		if len(c.heads) > 0 {
			head := newHead(b.HashOnly)
			for s := range c.heads {
				push(s, head)
			}
		}
		if c.logs.n > 0 {
			for i := range b.Logs {
				l := &b.Logs[i]
				c.logs.match(l, b.Number, func(s *sub) { push(s, l.Raw) })
			}
		}
	}
	for _, cn := range slow {
		c.dropSlowLocked(cn)
	}
	return c.deliveries
}

// dropSlowLocked disconnects a connection whose queue overflowed.
func (c *Center) dropSlowLocked(cn *conn) {
	if _, ok := c.conns[cn.n]; !ok {
		return // already dropped
	}
	queued, bytes := cn.queued()
	c.m.slow.Inc()
	c.log.Warn("disconnected a subscriber that could not keep up",
		"subscriptions", len(cn.subs), "queued", queued, "queued_bytes", bytes)
	c.dropLocked(cn)
	cn.n.Disconnect(closeSlow, slowReason)
}

// dropLocked forgets a connection and every subscription on it.
func (c *Center) dropLocked(cn *conn) {
	if _, ok := c.conns[cn.n]; !ok {
		return
	}
	delete(c.conns, cn.n)
	for _, s := range cn.subs {
		c.removeLocked(s)
	}
	cn.close()
}

// removeLocked takes one subscription out of every index.
func (c *Center) removeLocked(s *sub) {
	if s.gone.Swap(true) {
		return
	}
	delete(s.c.subs, s.id)
	c.m.subs[s.kind].Dec()
	switch s.kind {
	case kindHeads:
		delete(c.heads, s)
	case kindLogs:
		c.logs.remove(s)
		s.c.filterBytes -= s.filter.size
		c.m.filterBytes.Sub(float64(s.filter.size))
	case kindPending:
		g := s.group
		delete(g.subs, s)
		if len(g.subs) == 0 {
			g.cancel()
			if c.pending[g.key] == g { // a refused group may have been replaced
				delete(c.pending, g.key)
			}
		}
	}
}

// errors a subscriber sees, as geth words them.
var (
	errNotifications = &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "notifications not supported"}
	errNotFound      = &jrpc.Error{Code: -32000 /* geth's plain error */, Message: "subscription not found"}
	errStopped       = &jrpc.Error{Code: jrpc.CodeShuttingDown, Message: "server is shutting down"}
)

func invalidParams(msg string) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeInvalidParams, Message: msg}
}

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
			return nil, invalidParams("too many arguments, want at most 1")
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
			return nil, invalidParams("too many arguments, want at most 2")
		}
		f, err := parseLogFilter(args[1], filterLimits{addresses: c.opts.MaxAddresses, topics: c.opts.MaxTopics})
		var le *limitError
		switch {
		case errors.As(err, &le):
			return nil, &jrpc.Error{Code: jrpc.CodeLimitExceeded, Message: le.msg}
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
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound,
			Message: strconv.Quote(name) + " is not a subscription venn serves: " +
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
		c.crew.Go(func() { c.watch(cn) })
	}
	if len(cn.subs) >= c.opts.MaxPerConn {
		return nil, &jrpc.Error{Code: jrpc.CodeLimitExceeded, Message: "too many subscriptions on this connection: " +
			"max_subscriptions_per_connection (" + strconv.Itoa(c.opts.MaxPerConn) + ") reached"}
	}
	if s.kind == kindLogs {
		if held := cn.filterBytes + s.filter.size; held > c.opts.MaxFilterBytes {
			return nil, &jrpc.Error{Code: jrpc.CodeLimitExceeded, Message: fmt.Sprintf(
				"logs filters on this connection would take %d bytes: max_filter_bytes_per_connection (%d) reached",
				held, c.opts.MaxFilterBytes)}
		}
		cn.filterBytes += s.filter.size
		c.m.filterBytes.Add(float64(s.filter.size))
	}
	s.c = cn
	s.since = c.deliveries
	cn.subs[s.id] = s
	cn.hold()
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

// watch forgets cn's subscriptions once its connection closes, or ends
// with the Center.
func (c *Center) watch(cn *conn) {
	select {
	case <-cn.n.Closed():
		c.mu.Lock()
		c.dropLocked(cn)
		c.mu.Unlock()
	case <-c.ctx.Done():
	}
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

// logIndex finds the logs subscriptions a log matches: by address for
// filters that name addresses, and every filter that names none.
type logIndex struct {
	byAddr map[string]subSet
	any    map[*sub]struct{}
	n      int
	// peak is the most addresses byAddr held since it was last made: a Go
	// map never gives back its table, so one that emptied out is made
	// again, or a client that subscribed 100,000 addresses and left would
	// keep megabytes held.
	peak int
}

// indexShrinkMin is the smallest table worth making again when it empties.
const indexShrinkMin = 1024

// subSet is the subscriptions that name one address. Most addresses are
// named by one subscription, which needs no map of its own: a filter of
// many addresses costs an index entry per address, not a map per address.
type subSet struct {
	one  *sub
	many map[*sub]struct{}
}

func newLogIndex() logIndex {
	return logIndex{byAddr: map[string]subSet{}, any: map[*sub]struct{}{}}
}

func (x *logIndex) add(s *sub) {
	x.n++
	if len(s.filter.addrs) == 0 {
		x.any[s] = struct{}{}
		return
	}
	for _, a := range s.filter.addrs {
		set := x.byAddr[a]
		switch {
		case set.one == s:
		case set.one == nil && set.many == nil:
			set.one = s
		case set.many == nil:
			set.many = map[*sub]struct{}{set.one: {}, s: {}}
			set.one = nil
		default:
			set.many[s] = struct{}{}
		}
		x.byAddr[a] = set
	}
	x.peak = max(x.peak, len(x.byAddr))
}

func (x *logIndex) remove(s *sub) {
	x.n--
	if len(s.filter.addrs) == 0 {
		delete(x.any, s)
		return
	}
	for _, a := range s.filter.addrs {
		set, ok := x.byAddr[a]
		switch {
		case !ok:
		case set.one == s:
			delete(x.byAddr, a)
		case set.many != nil:
			delete(set.many, s)
			if len(set.many) == 0 {
				delete(x.byAddr, a)
			}
		}
	}
	if x.peak >= indexShrinkMin && len(x.byAddr) <= x.peak/4 {
		m := make(map[string]subSet, len(x.byAddr))
		maps.Copy(m, x.byAddr)
		x.byAddr, x.peak = m, len(m)
	}
}

// match calls fn for each subscription that l, of block n, matches, once.
func (x *logIndex) match(l *evm.Log, n uint64, fn func(*sub)) {
	if set, ok := x.byAddr[l.Address]; ok {
		if set.one != nil && set.one.filter.matches(l, n) {
			fn(set.one)
		}
		for s := range set.many {
			if s.filter.matches(l, n) {
				fn(s)
			}
		}
	}
	for s := range x.any {
		if s.filter.matches(l, n) {
			fn(s)
		}
	}
}

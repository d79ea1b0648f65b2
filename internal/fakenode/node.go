package fakenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Defaults of Options.
const (
	DefaultChainID        = 1337
	DefaultHead           = 100
	DefaultGenesisTime    = 1_700_000_000
	DefaultBlockTime      = 12 * time.Second
	DefaultSafeDepth      = 32
	DefaultFinalizedDepth = 64
	DefaultClientVersion  = "fakenode/v1"
)

// Lifecycle limits.
const (
	readHeaderTimeout = 10 * time.Second
	// relistenTimeout bounds SetDown(false)'s retries to bind the old port.
	relistenTimeout = 2 * time.Second
	relistenBackoff = 10 * time.Millisecond
)

// Options configure a Node. The zero value is usable.
type Options struct {
	// ChainID is reported by eth_chainId and seeds every hash: nodes with
	// the same ChainID serve the same chain. Default 1337.
	ChainID uint64
	// Head is the initial head block number. Default 100 (SetHead(0) for a
	// chain of genesis only).
	Head uint64
	// Name labels the node's logs.
	Name string
	// GenesisTime is block 0's timestamp. Default 1_700_000_000, fixed so
	// that runs are reproducible.
	GenesisTime uint64
	// BlockTime spaces the blocks' timestamps: block n's is GenesisTime +
	// n*BlockTime, in whole seconds (rounded down, as on a chain whose
	// blocks come faster than its timestamps tick). Default 12 s. It does
	// not mine: the chain moves only when told to.
	BlockTime time.Duration
	// SafeDepth and FinalizedDepth place the "safe" and "finalized" tags
	// below the visible head. Defaults 32 and 64.
	SafeDepth      uint64
	FinalizedDepth uint64
	// Contracts is how many contracts emit the synthetic logs, each
	// transaction's log from the next in turn ([Node.Contracts]). Default
	// (and at least) the three of [Contracts]; a history bench asks for
	// thousands, so that one contract's logs are as rare as on a real
	// chain.
	Contracts int
	// ClientVersion is web3_clientVersion's answer. Default "fakenode/v1".
	ClientVersion string
	// Logger receives debug logs of faults and connections. Default: none.
	Logger *slog.Logger
	// Sleep waits out SetLatency and SetSlowTail: it returns once d has
	// passed, or false as soon as ctx ends (then nothing is answered).
	// Default: a timer, also cut short by Close. A test that wants the
	// latency the code under test measures to be the latency it injected,
	// however busy the machine, sleeps for real and then moves the clock
	// the code reads by exactly d.
	Sleep func(ctx context.Context, d time.Duration) bool
}

func (o Options) withDefaults() Options {
	if o.ChainID == 0 {
		o.ChainID = DefaultChainID
	}
	if o.Head == 0 {
		o.Head = DefaultHead
	}
	if o.GenesisTime == 0 {
		o.GenesisTime = DefaultGenesisTime
	}
	if o.BlockTime <= 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.SafeDepth == 0 {
		o.SafeDepth = DefaultSafeDepth
	}
	if o.FinalizedDepth == 0 {
		o.FinalizedDepth = DefaultFinalizedDepth
	}
	if o.ClientVersion == "" {
		o.ClientVersion = DefaultClientVersion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Node is a fake EVM JSON-RPC node. All methods are safe for concurrent use.
type Node struct {
	opts   Options
	log    *slog.Logger
	hash   hasher
	tables *tables

	view    atomic.Pointer[chainView]
	faults  atomic.Pointer[faults]
	hook    atomic.Pointer[Hook]
	headers headerWatch
	slowSeq atomic.Uint64
	bufs    sync.Pool

	// mu orders chain changes against subscription changes, so that every
	// subscriber sees each change once and after its subscribe answer.
	mu       sync.Mutex
	subs     map[string]*subscription
	subSeq   uint64
	nextSalt uint64

	faultMu sync.Mutex // serialises fault writers; readers load faults

	txMu sync.Mutex
	sent map[common.Hash]struct{} // raw transactions seen

	pending pendingFilters // filters.go: eth_newPendingTransactionFilter

	callsMu sync.RWMutex
	calls   map[string]*atomic.Int64
	total   atomic.Int64

	lifeMu sync.Mutex
	closed bool
	done   chan struct{} // closed by Close: ends every wait
	addr   string        // host:port, fixed by the first Start
	srv    *http.Server
	served chan struct{} // closed when srv.Serve returns
	down   bool
	conns  map[*wsConn]struct{}
	wg     sync.WaitGroup // every ServeHTTP in flight
}

// New returns a node that does not listen yet: see Start and Handler.
func New(opts Options) *Node {
	opts = opts.withDefaults()
	n := &Node{
		opts:     opts,
		log:      opts.Logger.With("fakenode", opts.Name),
		hash:     hasher{seed: opts.ChainID},
		tables:   newTables(opts.Contracts),
		subs:     make(map[string]*subscription),
		nextSalt: 1 << 32, // clear of small salts callers pick for SetFork
		sent:     make(map[common.Hash]struct{}),
		calls:    make(map[string]*atomic.Int64),
		done:     make(chan struct{}),
		conns:    make(map[*wsConn]struct{}),
	}
	n.view.Store(&chainView{head: opts.Head})
	n.faults.Store(&faults{})
	return n
}

// Start is New plus Node.Start for tests; the node closes with the test.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	n := New(opts)
	if err := n.Start(); err != nil {
		t.Fatalf("start fake node: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// Start listens on 127.0.0.1 on a free port and serves HTTP and WebSocket
// on "/".
func (n *Node) Start() error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed {
		return errors.New("fake node: closed")
	}
	if n.addr != "" {
		return errors.New("fake node: already started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake node: listen: %w", err)
	}
	n.addr = ln.Addr().String()
	n.serve(ln)
	return nil
}

// serve runs an http.Server on ln. lifeMu must be held.
func (n *Node) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           n,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // always ErrServerClosed or a listener error after Close
	}()
	n.srv, n.served = srv, served
}

// URL is the node's HTTP endpoint, "" before Start.
func (n *Node) URL() string { return n.url("http") }

// WSURL is the node's WebSocket endpoint, "" before Start.
func (n *Node) WSURL() string { return n.url("ws") }

func (n *Node) url(scheme string) string {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.addr == "" {
		return ""
	}
	return scheme + "://" + n.addr + "/"
}

// Handler serves the node's HTTP and WebSocket API, for callers that mount
// it on their own server. SetDown does not apply to it.
func (n *Node) Handler() http.Handler { return n }

// Close stops listening, closes every connection and waits for every
// request in flight. It is idempotent.
func (n *Node) Close() {
	n.lifeMu.Lock()
	if n.closed {
		n.lifeMu.Unlock()
		return
	}
	n.closed = true
	close(n.done)
	srv, served := n.srv, n.served
	n.srv = nil
	conns := make([]*wsConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	n.lifeMu.Unlock()

	if srv != nil {
		_ = srv.Close() // closes the listener and every HTTP connection
		<-served
	}
	for _, c := range conns {
		c.close()
	}
	n.wg.Wait()

	n.mu.Lock()
	clear(n.subs)
	n.mu.Unlock()
}

// SetDown(true) makes the node look like a stopped process: the listener
// closes and every open connection is cut. SetDown(false) listens again on
// the same port. It applies only to a node started with Start.
func (n *Node) SetDown(on bool) {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed || n.addr == "" || on == n.down {
		return
	}
	if on {
		n.down = true
		srv, served := n.srv, n.served
		n.srv = nil
		_ = srv.Close()
		<-served
		for c := range n.conns {
			c.close()
		}
		n.log.Debug("down")
		return
	}
	// The port was ours a moment ago; another process taking it in between
	// is possible but rare, so retry briefly rather than fail.
	deadline := time.Now().Add(relistenTimeout)
	for {
		ln, err := net.Listen("tcp", n.addr)
		if err == nil {
			n.down = false
			n.serve(ln)
			n.log.Debug("up")
			return
		}
		if time.Now().After(deadline) {
			n.log.Error("relisten failed, node stays down", "err", err)
			return
		}
		time.Sleep(relistenBackoff)
	}
}

// enter admits a request unless the node is closed; the caller must call
// n.wg.Done when it ends.
func (n *Node) enter() bool {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	return true
}

// addConn registers a WebSocket connection so that SetDown and Close can cut
// it; false when the node is closed or down.
func (n *Node) addConn(c *wsConn) bool {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed || n.down {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Node) removeConn(c *wsConn) {
	n.lifeMu.Lock()
	delete(n.conns, c)
	n.lifeMu.Unlock()
}

// Head is the chain's head block number (the node admits to Head()-lag).
func (n *Node) Head() uint64 { return n.view.Load().head }

// BlockHash is the hash of block num on the current chain, whether or not
// the node serves it yet.
func (n *Node) BlockHash(num uint64) string {
	v := n.view.Load()
	return n.hasherOf(v).block(num, v.saltAt(num)).Hex()
}

// TxHash is the hash of transaction idx (0 or 1) of block num (>= 1) on the
// current chain.
func (n *Node) TxHash(num uint64, idx int) string {
	v := n.view.Load()
	return n.hasherOf(v).tx(num, idx, v.saltAt(num)).Hex()
}

// Mine advances the head by k blocks and notifies subscribers of each.
func (n *Node) Mine(k int) {
	if k <= 0 {
		return
	}
	n.change(func(v *chainView) *chainView {
		return &chainView{head: v.head + uint64(k), lag: v.lag, forks: v.forks, chain: v.chain}
	})
}

// SetHead moves the head to h, backwards too (a rewind: subscribers get the
// new head and removed logs). Blocks mined again after a rewind have the
// same hashes as before unless a fork changed them.
func (n *Node) SetHead(h uint64) {
	n.change(func(v *chainView) *chainView {
		return &chainView{head: h, lag: v.lag, forks: v.forks, chain: v.chain}
	})
}

// SetFork gives every block numbered from onward a new hash (and new
// transactions and logs) derived from salt; salt 0 is the original chain.
// Visible blocks that change are reorged out: subscribers get their logs as
// removed, then the new blocks.
func (n *Node) SetFork(from, salt uint64) {
	n.change(func(v *chainView) *chainView { return v.withFork(from, salt) })
}

// Reorg replaces the top depth visible blocks (never genesis) with new ones
// at the same height, with a fresh salt.
func (n *Node) Reorg(depth uint64) {
	if depth == 0 {
		return
	}
	n.change(func(v *chainView) *chainView {
		vis := v.visible()
		from := uint64(1)
		if depth < vis {
			from = vis - depth + 1
		}
		n.nextSalt++
		return v.withFork(from, n.nextSalt)
	})
}

// SwitchChain makes the node serve, from now on, the chain a node built
// with ChainID id serves: eth_chainId, every hash, transaction and log are
// that chain's, at the same head, as when a provider's endpoint is pointed
// at another network. Forks set before are dropped; subscribers see the
// switch as a reorg from block 1. SwitchChain(0) goes back to the node's
// own chain.
func (n *Node) SwitchChain(id uint64) {
	if id == n.opts.ChainID {
		id = 0
	}
	n.change(func(v *chainView) *chainView {
		return &chainView{head: v.head, lag: v.lag, chain: id}
	})
}

// hasherOf is the hasher of the chain view v serves.
func (n *Node) hasherOf(v *chainView) hasher {
	if v.chain != 0 {
		return hasher{seed: v.chain}
	}
	return n.hash
}

// chainOf is the id of the chain view v serves.
func (n *Node) chainOf(v *chainView) uint64 {
	if v.chain != 0 {
		return v.chain
	}
	return n.opts.ChainID
}

// SetLag makes the node serve only up to Head()-k. Lowering it notifies the
// blocks that become visible; raising it looks like a rewind.
func (n *Node) SetLag(k uint64) {
	n.change(func(v *chainView) *chainView {
		return &chainView{head: v.head, lag: k, forks: v.forks, chain: v.chain}
	})
}

func (n *Node) change(fn func(*chainView) *chainView) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.view.Load()
	nv := fn(old)
	n.view.Store(nv)
	n.notifyChange(old, nv)
}

package stalker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes"
)

// testHistory returns a migrated history store of chain "test" in a fresh
// database, dropped when the test ends.
func testHistory(t *testing.T) *blockstore.Chain {
	t.Helper()
	pg, err := blockstore.Open(context.Background(), pgtest.New(t), blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close) // before the drop: cleanups run last first
	return pg.Chain(testChainID, "test")
}

// watchedArchive is the store as the stalker sees it, checking every block
// it is handed against the node at that moment: at or below the settled
// line (the node's head only grows in these tests, and the leader's head
// is never above it) and on the node's chain. Reorgs in these tests are
// never deeper than the confirmations, so a settled block's hash never
// changes afterwards either.
type watchedArchive struct {
	*blockstore.Chain
	node *fakenode.Node
	conf uint64

	mu       sync.Mutex
	bad      []string
	perBlock map[uint64]int
}

func (w *watchedArchive) Put(ctx context.Context, blocks []*evm.Block) error {
	head := w.node.Head()
	w.mu.Lock()
	for _, b := range blocks {
		if b.Number+w.conf > head {
			w.bad = append(w.bad, fmt.Sprintf("block %d handed over with the node's head at %d", b.Number, head))
		}
		if want := w.node.BlockHash(b.Number); b.Hash != want {
			w.bad = append(w.bad, fmt.Sprintf("block %d is %s, the chain's is %s", b.Number, b.Hash, want))
		}
		w.perBlock[b.Number]++
	}
	w.mu.Unlock()
	return w.Chain.Put(ctx, blocks)
}

func (w *watchedArchive) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bad {
		t.Error(b)
	}
}

// leader is a stalker leading chain "test" with archiving, stoppable and
// restartable on the same head store.
type leader struct {
	t      *testing.T
	pool   *remotes.Pool
	store  *headstore.Memory
	window *headstore.Window
	arch   *watchedArchive
	am     *ArchiveMetrics
	sm     *Metrics
	logs   *testkit.Buffer
	size   int
	now    func() time.Time // the stalkers' clock; nil: the real one
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// testClock is a clock that moves only when the test moves it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newLeader(t *testing.T, node *fakenode.Node, window int, conf uint64, hist *blockstore.Chain) *leader {
	t.Helper()
	l := newIdleLeader(t, node, window, conf, hist)
	l.start(conf)
	return l
}

// newIdleLeader is newLeader before its first start.
func newIdleLeader(t *testing.T, node *fakenode.Node, window int, conf uint64, hist *blockstore.Chain) *leader {
	t.Helper()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: testChainID,
		BlockTime: 50 * time.Millisecond, CallDeadline: 3 * time.Second},
		[]remotes.Config{{Name: "n0", URL: node.URL(), Timeout: time.Second}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := &leader{t: t, pool: pool, store: headstore.NewMemory(window), window: headstore.NewWindow(window),
		arch: &watchedArchive{Chain: hist, node: node, conf: conf, perBlock: map[uint64]int{}},
		am:   NewArchiveMetrics(nil), sm: NewMetrics(nil), logs: &testkit.Buffer{}, size: window}
	t.Cleanup(func() {
		l.stop()
		_ = pool.Stop(context.Background())
		l.arch.check(t)
	})
	return l
}

// start begins a leadership (a new one after stop: as after a restart or
// a failover, with the window still in the head store).
func (l *leader) start(conf uint64) {
	log := slog.New(slog.NewTextHandler(l.logs, nil))
	st := New(Config{Chain: "test", HeadConfig: HeadConfig{Window: l.size, FinalityInterval: 100 * time.Millisecond},
		Archive: ArchiveConfig{Store: l.arch, HistoryConfig: HistoryConfig{Confirmations: conf, Batch: 5}, Metrics: l.am}},
		l.pool, l.pool.Heads(), l.store, log, l.sm)
	if l.now != nil {
		st.now = l.now
	}
	fol := headstore.NewFollower("test", l.store, l.window, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Go(func() { st.Lead(ctx, headstore.MemoryEpoch) })
	l.wg.Go(func() { fol.Run(ctx) })
}

func (l *leader) stop() {
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
		l.cancel = nil
	}
}

// waitArchived waits until the store holds exactly want (ascending ranges).
func (l *leader) waitArchived(want ...blockstore.Range) {
	l.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got []blockstore.Range
	for {
		var err error
		got, err = l.arch.Covered(context.Background(), 0, 1<<40)
		if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("store covers %v (err %v), want %v\nlogs:\n%s", got, err, want, l.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStored checks that every stored block in r is the node's, byte for
// byte, as the history store serves it.
func checkStored(t *testing.T, hist *blockstore.Chain, node *fakenode.Node, r blockstore.Range) {
	t.Helper()
	ctx := context.Background()
	for n := r.From; n <= r.To; n++ {
		params := json.RawMessage(fmt.Sprintf(`["0x%x",true]`, n))
		got, ok, err := hist.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", params))
		if err != nil || !ok {
			t.Fatalf("block %d: not answered from the store (ok %v, err %v)", n, ok, err)
		}
		var b struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(got, &b); err != nil || b.Hash != node.BlockHash(n) {
			t.Errorf("stored block %d is %s, the chain's is %s", n, b.Hash, node.BlockHash(n))
		}
	}
}

func TestSettled(t *testing.T) {
	tests := []struct {
		name                   string
		head, finalized, confs uint64
		want                   uint64
		wantOK                 bool
	}{
		{name: "confirmations", head: 100, confs: 64, want: 36, wantOK: true},
		{name: "finalized lower", head: 100, finalized: 20, confs: 64, want: 20, wantOK: true},
		{name: "finalized higher", head: 100, finalized: 90, confs: 64, want: 36, wantOK: true},
		{name: "genesis settles", head: 64, confs: 64, want: 0, wantOK: true},
		{name: "too young", head: 63, confs: 64, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Settled(tt.head, tt.finalized, tt.confs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Settled(%d, %d, %d) = %d, %v; want %d, %v", tt.head, tt.finalized, tt.confs, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFirstHole(t *testing.T) {
	r := func(a, b uint64) blockstore.Range { return blockstore.Range{From: a, To: b} }
	tests := []struct {
		name     string
		give     []blockstore.Range
		from, to uint64
		want     uint64
	}{
		{name: "nothing stored", from: 10, to: 20, want: 10},
		{name: "all stored", give: []blockstore.Range{r(10, 20)}, from: 10, to: 20, want: 21},
		{name: "hole inside", give: []blockstore.Range{r(10, 12), r(15, 20)}, from: 10, to: 20, want: 13},
		{name: "hole first", give: []blockstore.Range{r(12, 20)}, from: 10, to: 20, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := firstHole(tt.give, tt.from, tt.to); got != tt.want {
				t.Errorf("firstHole = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestArchiveStoresSettledBlocksAsTheChainAdvances(t *testing.T) {
	// No finalized block within reach: confirmations set the line.
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	hist := testHistory(t)
	l := newLeader(t, node, 32, 8, hist)

	// A fresh store starts at the window's first block (100-31).
	l.waitArchived(blockstore.Range{From: 69, To: 92})
	for range 4 {
		node.Mine(3)
		l.waitArchived(blockstore.Range{From: 69, To: node.Head() - 8})
	}
	checkStored(t, hist, node, blockstore.Range{From: 69, To: 104})
	if got := testutil.ToFloat64(l.am.height.WithLabelValues("test")); got != 104 {
		t.Errorf("venn_archive_height = %v, want 104", got)
	}
	if got := testutil.ToFloat64(l.am.blocks.WithLabelValues("test")); got != 36 {
		t.Errorf("venn_archive_blocks_total = %v, want 36", got)
	}
	if !strings.Contains(l.logs.String(), "history store is empty") {
		t.Errorf("a fresh store's start is not logged:\n%s", l.logs.String())
	}
}

func TestArchiveFinalizedBindsTheSettledLine(t *testing.T) {
	// finalized = head-20 is below head-8: it is the line.
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 20, SafeDepth: 10})
	hist := testHistory(t)
	l := newIdleLeader(t, node, 32, 8, hist)
	clock := &testClock{t: time.Unix(1_000_000, 0)}
	l.now = clock.now
	l.start(8)
	l.waitArchived(blockstore.Range{From: 69, To: 80})

	// The line is the finalized block the leader read, not the node's: it
	// stays while the stalker's clock does, however far the head moves...
	node.Mine(5)
	waitPublished(t, l.window, node)
	if got, err := l.arch.Covered(context.Background(), 0, 1<<40); err != nil ||
		fmt.Sprint(got) != fmt.Sprint([]blockstore.Range{{From: 69, To: 80}}) {
		t.Fatalf("store covers %v (err %v) before finality was read again, want [{69 80}]", got, err)
	}
	// ... and moves with the next read, a finality interval later.
	clock.add(100 * time.Millisecond)
	l.waitArchived(blockstore.Range{From: 69, To: 85})
}

// TestArchiveNeverStoresAnOrphan reorgs the chain again and again, up to
// the confirmations deep, while it grows: no block the reorgs replaced is
// ever handed to the store, and what is stored is the chain's.
//
// The reorgs come as fast as the leader publishes them, faster than the
// archiver may store on a loaded machine; the window is wide enough that
// all the chain grows in the test (36 blocks) fits above what the archiver
// stored before it: however far it falls behind, no settled block leaves
// the window unarchived (which is a gap, left to backfill, not an orphan).
func TestArchiveNeverStoresAnOrphan(t *testing.T) {
	const conf, window = 6, 64
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 60, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	hist := testHistory(t)
	l := newLeader(t, node, window, conf, hist)
	l.waitArchived(blockstore.Range{From: 0, To: 54})

	const reorgs = 12
	for i := range reorgs {
		node.Mine(1 + i%3)
		depth := uint64(1 + i%conf) // 1..6: up to the confirmations exactly
		// Let the leader see the blocks about to be replaced first, so
		// that it publishes them and has to take them back.
		waitPublished(t, l.window, node)
		node.Reorg(depth)
		node.Mine(1)
		waitPublished(t, l.window, node)
	}
	if low := node.Head() - window + 1; low > 55 {
		t.Fatalf("the window starts at %d: blocks above the first archive may have left it unarchived", low)
	}
	l.waitArchived(blockstore.Range{From: 0, To: node.Head() - conf})
	checkStored(t, hist, node, blockstore.Range{From: 0, To: node.Head() - conf})
	l.arch.check(t)
	if got := testutil.ToFloat64(l.sm.reorgs.WithLabelValues("test")); got != reorgs {
		t.Errorf("the leader saw %v reorgs, want %d", got, reorgs)
	}
}

// waitPublished waits until the leader's window has the node's head.
func waitPublished(t *testing.T, w *headstore.Window, node *fakenode.Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, hash, ok := w.Head(); ok && n == node.Head() && hash == node.BlockHash(n) {
			return
		}
		if time.Now().After(deadline) {
			n, hash, _ := w.Head()
			t.Fatalf("window head %d %s, node %d %s", n, hash, node.Head(), node.BlockHash(node.Head()))
		}
		select {
		case <-w.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestArchiveResumesAfterRestart(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	hist := testHistory(t)
	l := newLeader(t, node, 32, 8, hist)
	l.waitArchived(blockstore.Range{From: 69, To: 92})

	// A new leadership (after a restart or a failover) picks up above the
	// highest stored block, within the window: no gap, nothing twice.
	l.stop()
	node.Mine(20)
	l.start(8)
	l.waitArchived(blockstore.Range{From: 69, To: 112})
	l.arch.mu.Lock()
	for n, k := range l.arch.perBlock {
		if k != 1 {
			t.Errorf("block %d handed to the store %d times", n, k)
		}
	}
	l.arch.mu.Unlock()
	checkStored(t, hist, node, blockstore.Range{From: 69, To: 112})
}

func TestArchiveLeavesADeepGapToBackfill(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	hist := testHistory(t)
	l := newLeader(t, node, 32, 8, hist)
	l.waitArchived(blockstore.Range{From: 69, To: 92})

	// Away longer than the backfill reaches (4 windows): the leader starts
	// a fresh window, and the archive goes on from it, logging the gap.
	l.stop()
	node.Mine(500)
	l.start(8)
	l.waitArchived(blockstore.Range{From: 69, To: 92}, blockstore.Range{From: 569, To: 592})
	if !strings.Contains(l.logs.String(), "gap below the head window, left to backfill") ||
		!strings.Contains(l.logs.String(), "from=93 to=568") {
		t.Errorf("the gap is not logged:\n%s", l.logs.String())
	}
}

// TestArchiveDeeperReorgIsLoggedNotOverwritten reorgs below the settled
// line, which the confirmations were chosen never to see: the stored
// blocks are left alone (the store refuses blocks that disagree with them),
// the batch that no longer fits is skipped and logged, and archiving goes
// on above it.
func TestArchiveDeeperReorgIsLoggedNotOverwritten(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 60, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	hist := testHistory(t)
	l := newLeader(t, node, 16, 4, hist)
	l.waitArchived(blockstore.Range{From: 45, To: 56})
	stored56 := node.BlockHash(56)

	node.Reorg(8) // 53..60 replaced; 53..56 were stored
	node.Mine(6)
	waitPublished(t, l.window, node)
	// The batch starting at 57 hangs off the new 56: refused. The batches
	// after it (which ones depends on the settled line when each was cut)
	// have no stored neighbour below them and go on up to the line, 62.
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := hist.Covered(context.Background(), 0, 1<<40)
		if err == nil && len(got) == 2 && got[0] == (blockstore.Range{From: 45, To: 56}) &&
			got[1].From > 57 && got[1].To == 62 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store covers %v (err %v), want [{45 56} {58..62 62}]\nlogs:\n%s", got, err, l.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(l.logs.String(), "archive: blocks conflict with stored neighbours; skipped, left to backfill") {
		t.Errorf("the conflict is not logged:\n%s", l.logs.String())
	}
	res, ok, err := hist.Answer(context.Background(), evm.ParseCall("eth_getBlockByNumber", json.RawMessage(`["0x38",false]`)))
	if err != nil || !ok || !strings.Contains(string(res), stored56) {
		t.Errorf("stored block 56 changed: %v %v %.100s", ok, err, res)
	}
}

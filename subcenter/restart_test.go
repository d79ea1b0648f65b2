package subcenter

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	headredis "github.com/venn-gateway/venn/headstore/redisstore"
	"github.com/venn-gateway/venn/internal/freeport"
)

// redisServer is a private redis-server that a test can restart empty,
// as a Redis without persistence comes back after a crash.
type redisServer struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
	rdb  *redis.Client
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: install Debian's redis-server package (scripts/test.sh does)")
	}
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	r := &redisServer{t: t, addr: "127.0.0.1:" + strconv.Itoa(ports[0])}
	r.rdb = redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	r.start()
	t.Cleanup(func() {
		r.stop()
		_ = r.rdb.Close()
	})
	return r
}

func (r *redisServer) start() {
	r.t.Helper()
	port := r.addr[len("127.0.0.1:"):]
	r.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.t.TempDir())
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			r.t.Fatal("redis-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *redisServer) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// restart kills the server and starts an empty one on the same port.
func (r *redisServer) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// TestRedisRestartIsNotAReorg: Redis restarts empty with no reorg; the
// leader rebuilds the window from scratch, a block at a time, and the
// follower reloads it while it is still short. Subscribers must see no
// removed log and no head twice: the rebuilt window only grows back into
// the chain they were told, and from its top on they get each block once.
func TestRedisRestartIsNotAReorg(t *testing.T) {
	const size = 16
	rs := startRedisServer(t)
	store := headredis.New(rs.rdb, "test", size)
	ctx := t.Context()
	setEpoch := func(n uint64) {
		t.Helper()
		if err := rs.rdb.Set(ctx, "venn:{test}:epoch", n, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(epoch, from, to uint64) {
		t.Helper()
		for n := from; n <= to; n++ {
			if err := store.Publish(ctx, epoch, &headstore.Event{Added: []*evm.Block{block("a", n, "a")}}); err != nil {
				t.Fatalf("publish %d: %v", n, err)
			}
		}
	}
	setEpoch(1)
	publish(1, 1, 30)

	w := headstore.NewWindow(size)
	fctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { headstore.NewFollower("test", store, w, nil, nil).Run(fctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	// waitTop waits until the window's head is n in a history other than
	// not (the one before the restart).
	waitTop := func(n uint64, not string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			changed := w.Changed()
			gen, _ := w.Seq()
			if top, _, ok := w.Head(); ok && top == n && gen != not {
				return gen
			}
			select {
			case <-changed:
			case <-time.After(time.Until(deadline)):
				top, _, _ := w.Head()
				t.Fatalf("the window's head is %d (gen %q), want %d", top, gen, n)
			}
		}
	}
	oldGen := waitTop(30, "")

	// The dispatcher is driven by hand: it looks at every state the
	// window goes through, the worst a running one can do.
	c := New("test", w, nil, Options{}, nil, nil)
	t.Cleanup(c.Stop)
	c.sync()
	early := newNotifier() // subscribed at 30: sent 31 on
	subscribe(t, c, early, `["newHeads"]`)
	subscribe(t, c, early, `["logs",{}]`)
	publish(1, 31, 31)
	waitTop(31, "")
	c.sync()
	early.collect(t, 2)
	late := newNotifier() // subscribed at 31: sent nothing before the restart
	subscribe(t, c, late, `["logs",{}]`)

	rs.restart()
	setEpoch(2)
	// The new leader's fresh window: its last size blocks below the
	// remotes' head, 33, published one at a time as the stalker does.
	const head = 33
	for n := uint64(head - size + 1); n <= head; n++ {
		publish(2, n, n)
		waitTop(n, oldGen)
		c.sync()
	}
	publish(2, head+1, head+1)
	waitTop(head+1, oldGen)
	c.sync()

	type seen struct {
		number  uint64
		removed bool
	}
	read := func(n *notifier, want int) []seen {
		t.Helper()
		var out []seen
		notes := n.collect(t, want)
		for more := true; more; {
			select {
			case x := <-n.got:
				notes = append(notes, x)
			case <-time.After(100 * time.Millisecond):
				more = false
			}
		}
		for _, x := range notes {
			var v struct {
				Number      string `json:"number"`
				BlockNumber string `json:"blockNumber"`
				Removed     bool   `json:"removed"`
			}
			if err := json.Unmarshal([]byte(x.result), &v); err != nil {
				t.Fatal(err)
			}
			q := v.Number + v.BlockNumber
			num, err := strconv.ParseUint(q[2:], 16, 64)
			if err != nil {
				t.Fatalf("notification %s", x.result)
			}
			out = append(out, seen{num, v.Removed})
		}
		return out
	}
	// Heads and logs of 32, 33, 34, each once; nothing removed.
	want := []seen{{32, false}, {32, false}, {33, false}, {33, false}, {34, false}, {34, false}}
	if got := read(early, len(want)); !slices.Equal(got, want) {
		t.Errorf("subscriber of 31 on, after the restart:\n got %v\nwant %v", got, want)
	}
	wantLate := []seen{{32, false}, {33, false}, {34, false}}
	if got := read(late, len(wantLate)); !slices.Equal(got, wantLate) {
		t.Errorf("subscriber of 32 on, after the restart:\n got %v\nwant %v", got, wantLate)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// Shape of the failover load.
const (
	loadWorkers  = 8
	loadDuration = 4 * time.Second
	killAfter    = 1500 * time.Millisecond
	// maxErrorsShown bounds the errors a failing run prints.
	maxErrorsShown = 10
)

// loadCall is a call whose answer is the same from either node: both run
// the same geth on a fresh dev chain where nobody transacts. None depends
// on the head (eth_gasPrice does, through its base fee), since geth --dev
// may seal an empty block of its own on one node and not the other.
type loadCall struct {
	method string
	params []any
}

const zeroAddress = "0x0000000000000000000000000000000000000000"

func loadCalls() []loadCall {
	return []loadCall{
		{"eth_getBalance", []any{zeroAddress, "latest"}},
		{"eth_getTransactionCount", []any{zeroAddress, "latest"}},
		{"eth_getCode", []any{zeroAddress, "latest"}},
		{"eth_getStorageAt", []any{zeroAddress, "0x0", "latest"}},
		{"web3_clientVersion", nil},
		{"net_version", nil},
	}
}

// TestFailoverUnderLoad kills one of two remotes in the middle of steady
// load and expects clients to see no error at all: calls in flight to the
// dead node and every call after it go to the live one.
func TestFailoverUnderLoad(t *testing.T) {
	g1 := gethtest.Start(t, gethtest.Options{})
	g2 := gethtest.Start(t, gethtest.Options{})
	// One block each: venn marks a remote healthy (venn_remote_healthy) when
	// its head moves, which a dev chain at genesis never does.
	for _, g := range []*gethtest.Geth{g1, g2} {
		mineOne(t, g)
	}
	v := startVenn(t, []*gethtest.Geth{g1, g2}, vennOptions{})
	waitRemotesHealthy(t, v, "g1", "g2")

	calls := loadCalls()
	want := make([]string, len(calls))
	for i, c := range calls {
		a, b := call(t, g1.HTTPURL(), c.method, c.params...), call(t, g2.HTTPURL(), c.method, c.params...)
		if string(a) != string(b) {
			t.Fatalf("setup: %s differs between the nodes (%s vs %s); it cannot tell who answered", c.method, a, b)
		}
		want[i] = string(a)
	}
	g2Before, _ := v.metric(t, "venn_remote_calls_total", `remote="g2"`, `outcome="ok"`)

	var (
		total, afterKill atomic.Int64
		killed           atomic.Bool
		mu               sync.Mutex
		errs             []string
		errCount         int
	)
	fail := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		errCount++
		if len(errs) < maxErrorsShown {
			errs = append(errs, msg)
		}
	}

	start := time.Now()
	deadline := start.Add(loadDuration)
	var wg sync.WaitGroup
	for w := range loadWorkers {
		wg.Go(func() {
			for i := w; time.Now().Before(deadline); i++ {
				c := calls[i%len(calls)]
				sentAfterKill := killed.Load()
				res, err := tryCall(v.URL(chainName), c.method, c.params...)
				total.Add(1)
				switch {
				case err != nil:
					fail(fmt.Sprintf("%v %s: %v", time.Since(start).Round(time.Millisecond), c.method, err))
				case string(res) != want[i%len(calls)]:
					fail(fmt.Sprintf("%s = %s, want %s", c.method, res, want[i%len(calls)]))
				case sentAfterKill:
					afterKill.Add(1)
				}
			}
		})
	}

	// The kill is scheduled, not waited on: the workers run meanwhile.
	timer := time.NewTimer(killAfter)
	<-timer.C
	g1.Kill()
	killed.Store(true)
	t.Logf("killed g1 (pid %d) at %v", g1.PID(), time.Since(start).Round(time.Millisecond))
	wg.Wait()

	t.Logf("%d calls, %d sent after the kill, %d errors", total.Load(), afterKill.Load(), errCount)
	if errCount > 0 {
		t.Errorf("%d calls failed; first ones:\n%s", errCount, strings.Join(errs, "\n"))
	}
	if afterKill.Load() == 0 {
		t.Fatal("no call succeeded after g1 was killed")
	}
	g2After, _ := v.metric(t, "venn_remote_calls_total", `remote="g2"`, `outcome="ok"`)
	if g2After <= g2Before {
		t.Errorf("venn_remote_calls_total{remote=g2,outcome=ok} went from %v to %v: g2 served nothing", g2Before, g2After)
	}
}

// waitRemotesHealthy waits until venn reports every named remote in
// rotation, so the test starts with two live paths rather than whichever
// remote happened to pass its checks first.
func waitRemotesHealthy(t *testing.T, v *venn, names ...string) {
	t.Helper()
	var missing string
	ok := testkit.Poll(readyTimeout, func() bool {
		for _, n := range names {
			h, found := v.metric(t, "venn_remote_healthy", `remote="`+n+`"`)
			if !found || h != 1 {
				missing = n
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("remote %s not healthy in venn within %v", missing, readyTimeout)
	}
}

// mineOne has the dev account send itself 1 wei and waits for the block.
func mineOne(t *testing.T, g *gethtest.Geth) {
	t.Helper()
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	var tx string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction",
		map[string]any{"from": accounts[0], "to": accounts[0], "value": "0x1"}), &tx)
	waitReceipt(t, g, tx)
}

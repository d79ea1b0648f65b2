//go:build linux

package hostile

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
)

// Key rotation under load: both replicas' remotes have their keys rotated
// by a config reload, again and again, while clients call through them;
// half of the rotations also move each remote to the other node (another
// endpoint). Not one call fails, and the answers are the node's after. The
// old venn took a replaced remote out at once and let its replacement
// serve only once its chain id and head were known: with 100 ms remotes,
// each rotation failed about 7 calls with -32050.
func TestKeyRotationUnderLoadDropsNoCall(t *testing.T) {
	w := startWorld(t, options{})
	for _, n := range w.nodes {
		n.SetLatency(100 * time.Millisecond)
	}
	stopMining := w.mine(t)

	// The load: clients on both replicas, each calling every 20 ms (or
	// when its last call returned). eth_gasPrice is never cached: every
	// call reaches a remote.
	var (
		ok, failed atomic.Int64
		lastErr    atomic.Value
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	for _, r := range w.replicas {
		for range 4 {
			wg.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, _, err := r.callRaw("eth_gasPrice"); err != nil {
						failed.Add(1)
						lastErr.Store(err.Error())
					} else {
						ok.Add(1)
					}
				}
			})
		}
	}
	endLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer endLoad()

	const rotations = 8
	for i := 1; i <= rotations; i++ {
		key := fmt.Sprintf("/v3/KEY%04d0123456789abcdef", i)
		for _, r := range w.replicas {
			for j := range r.conf.Remotes {
				n := w.nodes[j]
				if i%4 >= 2 { // another endpoint: each remote on the other node
					n = w.nodes[(j+1)%len(w.nodes)]
				}
				r.conf.Remotes[j].URL = n.URL() + key
				r.conf.Remotes[j].WSURL = n.WSURL() + key
			}
			r.writeConfig(t)
			r.postReload(t)
		}
		served := ok.Load()
		testkit.WaitFor(t, waitLimit, fmt.Sprintf("calls answered after rotation %d", i), func() bool {
			return ok.Load() >= served+20
		})
	}
	endLoad()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d calls failed across %d rotations on %d replicas; last: %v",
			n, n+ok.Load(), rotations, len(w.replicas), lastErr.Load())
	}
	for _, n := range w.nodes {
		n.SetLatency(0)
	}
	stopMining()
	w.waitServing(t, w.replicas)
	for _, r := range w.replicas {
		checkAnswers(t, r, w.nodes[0])
	}
}

// postReload asks r to re-read its config file (POST /admin/reload, on
// its metrics listener) and fails t unless the reload was applied.
func (r *replica) postReload(t *testing.T) {
	t.Helper()
	resp, err := client.Post("http://"+r.metrics+"/admin/reload", "application/json", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replica %s: reload = %d %s", r.id, resp.StatusCode, body)
	}
}

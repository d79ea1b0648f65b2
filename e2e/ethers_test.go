package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// The ethers test runs e2e/ethers/pending.mjs, a Node script using ethers
// v6 over WebSocket, against venn in front of geth --dev reached over HTTP
// only.
const (
	ethersDir    = "ethers"
	ethersScript = "pending.mjs"
)

// ethersResult is what pending.mjs prints.
type ethersResult struct {
	Hashes   []string `json:"hashes"`
	Errors   []string `json:"errors"`
	TimedOut bool     `json:"timedOut"`
}

// TestEthersPendingOverHTTPOnlyRemote: ethers v6's provider.on("pending")
// through venn, whose only remote has no ws_url. It used to die on venn's
// -32601 for eth_subscribe("newPendingTransactions") (an unhandled
// rejection ends the Node process); now it gets every transaction sent,
// once.
func TestEthersPendingOverHTTPOnlyRemote(t *testing.T) {
	dir := nodeProject(t, ethersDir, "ethers", ethersScript)
	g := gethtest.Start(t, gethtest.Options{})
	dev := newDevSender(t, g)
	dev.send(t) // a first block, so that venn sees a head
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{httpOnly: true})

	ctx, cancel := context.WithTimeout(context.Background(), viemRunTimeout)
	defer cancel()
	var stdout bytes.Buffer
	stderr := &testkit.Buffer{}
	cmd := exec.CommandContext(ctx, "node", ethersScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"VENN_WS_URL="+v.WSURL(chainName),
		"TIMEOUT_MS="+strconv.FormatInt(viemScriptTimeout.Milliseconds(), 10))
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", ethersScript, err)
	}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel() // kills node if it still runs
		<-done
	})
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}

	// ethers' subscription reached venn.
	if !testkit.Poll(viemSubscribeWait, func() bool {
		n, _ := v.metric(t, "venn_subscriptions", `kind="newPendingTransactions"`)
		return n >= 1 || exited()
	}) {
		t.Fatalf("ethers' subscription did not reach venn within %v; node stderr:\n%s", viemSubscribeWait, stderr.String())
	}
	if exited() {
		t.Fatalf("node %s exited before subscribing: %v; stdout %s; stderr:\n%s", ethersScript, runErr, truncate(stdout.String()), stderr.String())
	}

	// Warm up: the subscription is counted before venn's pending filter is
	// in place on geth, and a transaction sent before that is never seen.
	// Send until ethers reports one of these, giving each a filter poll's
	// while to arrive.
	warmUntil := time.Now().Add(viemSubscribeWait)
	for seen := false; !seen; {
		h := dev.send(t)
		seen = testkit.Poll(pendingWarmWait, func() bool { return strings.Contains(stderr.String(), "pending "+h) || exited() })
		if exited() || !seen && time.Now().After(warmUntil) {
			t.Fatalf("no pending transaction reached ethers within %v (exited %v); stderr:\n%s", viemSubscribeWait, exited(), stderr.String())
		}
	}

	var want []string
	for range pendingSends {
		want = append(want, dev.send(t))
	}
	line, err := json.Marshal(map[string]any{"hashes": want})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(stdin, "%s\n", line); err != nil {
		t.Fatalf("tell node %s what was sent: %v; stderr:\n%s", ethersScript, err, stderr.String())
	}
	_ = stdin.Close()

	select {
	case <-done:
	case <-ctx.Done():
		<-done
		t.Fatalf("node %s did not finish within %v; stderr:\n%s", ethersScript, viemRunTimeout, stderr.String())
	}
	var res ethersResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node %s: %v; output %q; stderr:\n%s", ethersScript, runErr, truncate(stdout.String()), stderr.String())
	}
	if res.TimedOut || runErr != nil || len(res.Errors) > 0 {
		t.Errorf("node %s: exit %v, timed out %v, errors %q; stderr:\n%s", ethersScript, runErr, res.TimedOut, res.Errors, stderr.String())
	}
	got := map[string]int{}
	for _, h := range res.Hashes {
		got[strings.ToLower(h)]++
	}
	for _, h := range want {
		if got[h] != 1 {
			t.Errorf("ethers got transaction %s %d times, want once", h, got[h])
		}
	}
	t.Logf("ethers saw %d pending transactions through venn, %d of them sent by the test", len(res.Hashes), len(want))
}

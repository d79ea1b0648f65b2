//go:build linux

package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// postTo sends one call to chain on r and returns its answer's result, or
// an error for a refused request or an error answer.
func postTo(r *replica, chain, method string, params ...any) (json.RawMessage, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := client.Post("http://"+r.rpc+"/"+chain, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", method, resp.StatusCode, err)
	}
	if msg.Error != nil {
		return nil, fmt.Errorf("%s: %s", method, msg.Error)
	}
	return msg.Result, nil
}

// TestSIGHUPReloads runs venn as a process, rewrites its config file and
// sends it SIGHUP: the remote the file adds takes calls, and the chain it
// adds is served, while the chain it had keeps serving.
func TestSIGHUPReloads(t *testing.T) {
	c := startCluster(t, 1)
	added := fakenode.New(fakenode.Options{ChainID: chainID, Head: 200}) // mined with the others
	if err := added.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(added.Close)
	other := fakenode.New(fakenode.Options{ChainID: 10, Head: 50})
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	before := c.nodes
	c.nodes = append(c.nodes, added)
	stop := c.mine(t)
	defer stop()
	r := c.replicas[0]
	c.waitConverged(t, c.replicas) // serving: SIGHUP is venn's to handle by now
	if _, err := postTo(r, "other", "eth_chainId"); err == nil {
		t.Fatal("chain other served before the reload")
	}

	y := c.config(r, append(before, added)).YAML() +
		fmt.Sprintf("  - name: other\n    chain_id: 10\n    remotes:\n      - {name: o, url: %q}\n", other.URL())
	if err := os.WriteFile(r.cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	r.signal(syscall.SIGHUP)

	if !testkit.Poll(waitLimit, func() bool {
		res, err := postTo(r, "other", "eth_getBalance", "0x0000000000000000000000000000000000000001", "0x5")
		return err == nil && len(res) > 0 && other.Calls("eth_getBalance") > 0
	}) {
		t.Fatalf("the chain the reload added is not served within %v", waitLimit)
	}
	i := 0
	if !testkit.Poll(waitLimit, func() bool {
		i++ // another address each time: no cache answers it
		at := hexq(c.nodes[0].Head() - 5)
		_, err := postTo(r, chain, "eth_getBalance", fmt.Sprintf("0x%040x", i), at)
		return err == nil && added.Calls("eth_getBalance") > 0
	}) {
		t.Fatalf("the remote the reload added took no call in %d within %v", i, waitLimit)
	}
	if log, _ := os.ReadFile(r.logPath); !strings.Contains(string(log), "config reloaded") {
		t.Errorf("venn's log does not say the config was reloaded:\n%s", tail(string(log), 2000))
	}
	if r.proc == nil {
		t.Fatal("venn exited")
	}
	if exited, err := r.proc.Exited(); exited {
		t.Fatalf("venn exited on SIGHUP: %v", err)
	}
}

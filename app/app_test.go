package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is one chain "test" whose only remote is unreachable; its URL
// carries a fake key that must not leak anywhere.
func testConfig(t *testing.T, listen string) *Config {
	t.Helper()
	return mustParse(t, `
listen: `+listen+`
metrics_listen: 127.0.0.1:0
log: {level: debug}
shutdown_timeout: 5s
chains:
  - name: test
    chain_id: 1337
    call_deadline: 2s
    remotes:
      - name: unreachable
        url: http://`+testkit.ClosedAddr(t)+`/SECRETKEY
        timeout: 500ms
`)
}

func TestAppServesWithoutRemotes(t *testing.T) {
	logs := &testkit.Buffer{}
	cfg := testConfig(t, "127.0.0.1:0")
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()

	metrics := "http://" + s.metrics.bound.String()
	rpc := "http://" + s.rpc.bound.String()
	client := &http.Client{Timeout: 10 * time.Second}

	t.Run("healthz", func(t *testing.T) {
		code, body := get(t, client, metrics+"/healthz")
		if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("healthz = %d %q", code, body)
		}
	})
	t.Run("readyz", func(t *testing.T) {
		code, body := get(t, client, metrics+"/readyz")
		if code != http.StatusServiceUnavailable {
			t.Errorf("readyz = %d, want 503", code)
		}
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("readyz body %q: %v", body, err)
		}
		if r.Ready || len(r.Chains) != 1 || r.Chains[0].Chain != "test" || r.Chains[0].Ready {
			t.Errorf("readyz = %+v", r)
		}
		if len(r.Chains[0].Remotes) != 1 || r.Chains[0].Remotes[0] != "unreachable" {
			t.Errorf("remotes = %v, want the remote's name", r.Chains[0].Remotes)
		}
		if strings.Contains(body, "SECRETKEY") || strings.Contains(body, "http://") {
			t.Errorf("readyz shows a URL: %s", body)
		}
	})
	t.Run("metrics", func(t *testing.T) {
		code, body := get(t, client, metrics+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("metrics = %d", code)
		}
		for _, want := range []string{"go_goroutines", "process_", `venn_remote_healthy{chain="test",remote="unreachable"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if strings.Contains(body, "SECRETKEY") {
			t.Error("metrics show the remote's URL")
		}
	})
	t.Run("rpc without a remote", func(t *testing.T) {
		resp := post(t, client, rpc+"/test", `{"jsonrpc":"2.0","id":7,"method":"eth_blockNumber","params":[]}`)
		if resp.Error == nil || resp.Result != nil {
			t.Fatalf("got %+v, want a JSON-RPC error", resp)
		}
		if string(resp.ID) != "7" {
			t.Errorf("id = %s", resp.ID)
		}
		if strings.Contains(resp.Error.Message+string(resp.Error.Data), "SECRETKEY") {
			t.Errorf("error shows the remote's URL: %+v", resp.Error)
		}
	})
	t.Run("chain id from config", func(t *testing.T) {
		resp := post(t, client, rpc+"/test", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		if string(resp.Result) != `"0x539"` {
			t.Errorf("eth_chainId = %+v, want 0x539", resp)
		}
	})
	t.Run("unknown chain", func(t *testing.T) {
		resp := post(t, client, rpc+"/nope", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		if resp.Error == nil || resp.Error.Code != jrpc.CodeUnknownChain {
			t.Errorf("got %+v, want code %d", resp, jrpc.CodeUnknownChain)
		}
	})

	client.CloseIdleConnections()
	app.RequireStop()
	if strings.Contains(logs.String(), "SECRETKEY") {
		t.Errorf("logs show the remote's URL")
	}
}

// TestShutdownDelay: on stop, /readyz turns 503 at once while calls are
// still answered for shutdown_delay, so a load balancer can move traffic
// away before venn refuses anything.
func TestShutdownDelay(t *testing.T) {
	const delay = 3 * time.Second
	node := fakenode.Start(t, fakenode.Options{})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
shutdown_delay: `+delay.String()+`
chains:
  - name: test
    chain_id: 1337
    remotes:
      - name: node
        url: `+node.URL()+`
`)
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s))
	app.RequireStart()
	metrics := "http://" + s.metrics.bound.String()
	rpc := "http://" + s.rpc.bound.String()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	readyz := func() (int, readiness) {
		code, body := get(t, client, metrics+"/readyz")
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("readyz body %q: %v", body, err)
		}
		return code, r
	}
	testkit.WaitFor(t, 10*time.Second, "readyz 200 with a live node", func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})

	stopping := time.Now()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- app.Stop(ctx)
	}()
	testkit.WaitFor(t, 10*time.Second, "readyz 503 once stopping", func() bool {
		code, r := readyz()
		return code == http.StatusServiceUnavailable && r.Draining && !r.Ready
	})

	resp, err := client.Post(rpc+"/test", "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`))
	if err != nil {
		t.Fatalf("call during shutdown_delay: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":1,"result":"0x64"}`; resp.StatusCode != http.StatusOK || string(body) != want {
		t.Errorf("call during shutdown_delay = %d %s, want 200 %s", resp.StatusCode, body, want)
	}
	select {
	case err := <-stopped:
		t.Fatalf("stopped (%v) while the call was served, before shutdown_delay", err)
	default:
	}

	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
	if took := time.Since(stopping); took < delay {
		t.Errorf("stop took %v, want at least shutdown_delay (%v)", took, delay)
	}
}

func TestAppFailsWhenPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t, ln.Addr().String())
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = app.Start(ctx)
	if err == nil {
		app.RequireStop()
		t.Fatal("start succeeded on a taken port")
	}
	if !strings.Contains(err.Error(), "rpc server") {
		t.Errorf("err = %v, want it to name the rpc server", err)
	}
}

// TestNewDefaultGraph checks the embedded default wires without starting
// (which would dial public endpoints).
func TestNewDefaultGraph(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := New(cfg, LogOutput(io.Discard), fx.NopLogger).Err(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

type wireResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *jrpc.Error     `json:"error"`
}

func post(t *testing.T, c *http.Client, url, body string) wireResponse {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r wireResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return r
}

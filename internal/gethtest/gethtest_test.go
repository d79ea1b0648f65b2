package gethtest

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestStartAnswersAndKill(t *testing.T) {
	g := Start(t, Options{})

	var id string
	if err := json.Unmarshal(g.MustCall(t, "eth_chainId"), &id); err != nil || id != "0x539" {
		t.Fatalf("eth_chainId = %q (%v), want 0x539", id, err)
	}
	var accounts []string
	if err := json.Unmarshal(g.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
		t.Fatalf("eth_accounts = %v (%v), want the funded dev account", accounts, err)
	}
	if !strings.HasPrefix(g.WSURL(), "ws://127.0.0.1:") || !strings.HasPrefix(g.HTTPURL(), "http://127.0.0.1:") {
		t.Fatalf("urls %s %s, want loopback", g.HTTPURL(), g.WSURL())
	}

	calls := []struct {
		name string
		call func(context.Context, string, ...any) (json.RawMessage, error)
	}{{"Call", g.Call}, {"CallWS", g.CallWS}}
	for _, c := range calls {
		if res, err := c.call(context.Background(), "eth_chainId"); err != nil || string(res) != `"0x539"` {
			t.Errorf("%s eth_chainId = %s, %v; want \"0x539\"", c.name, res, err)
		}
		_, err := c.call(context.Background(), "no_such_method")
		if rpcErr, ok := err.(*RPCError); !ok || rpcErr.Code != -32601 {
			t.Errorf("%s: unknown method error = %v, want *RPCError -32601", c.name, err)
		}
	}

	g.Kill()
	if !g.Exited() {
		t.Fatal("Exited() = false after Kill")
	}
	g.Kill() // a second Kill is a no-op
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.HTTPURL(), strings.NewReader("{}"))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("geth still answers after Kill")
	}
}

func TestStartRejectsSubSecondPeriod(t *testing.T) {
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	// Fatalf calls runtime.Goexit, so run Start where that only ends this goroutine.
	go func() {
		defer close(done)
		Start(ft, Options{Period: 500 * time.Millisecond})
	}()
	<-done
	if !ft.fataled {
		t.Fatal("Start accepted a 500ms period; geth's --dev.period is whole seconds")
	}
}

// fatalRecorder records Fatal instead of failing the real test.
type fatalRecorder struct {
	testing.TB
	fataled bool
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fataled = true
	f.TB.Logf("(expected) "+format, args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.fataled = true
	f.TB.Log(append([]any{"(expected)"}, args...)...)
	runtime.Goexit()
}

func (f *fatalRecorder) Helper() {}

func TestBinaryMissingSaysHowToGetIt(t *testing.T) {
	t.Setenv(envBinary, filepath.Join(t.TempDir(), "no-geth"))
	_, err := Binary()
	const want = "geth v1.17.10 not found: run scripts/test.sh (it builds it) or set VENN_GETH"
	if err == nil || err.Error() != want {
		t.Fatalf("Binary() error = %v, want %q", err, want)
	}
}

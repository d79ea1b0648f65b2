package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "venn.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun(t *testing.T) {
	good := writeFile(t, `
chains:
  - name: ethereum
    chain_id: 1
    remotes:
      - {name: a, url: "http://127.0.0.1:1/${VENN_MAIN_TEST_KEY:-k}"}
      - {name: b, url: "ws://127.0.0.1:2"}
  - name: base
    chain_id: 8453
    remotes:
      - {name: a, url: "https://127.0.0.1:3"}
`)
	bad := writeFile(t, `
chains:
  - name: Ethereum
    remotes:
      - {name: a, url: "ftp://SECRETKEY@127.0.0.1"}
`)
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		notStderr  []string
	}{
		{
			name:       "check-config ok",
			give:       []string{"check-config", good},
			wantCode:   0,
			wantStdout: []string{"ok: 2 chains, 3 remotes\n"},
		},
		{
			name:     "check-config prints every error on its own line",
			give:     []string{"check-config", bad},
			wantCode: 1,
			wantStderr: []string{
				"chains[0].name: must match [a-z0-9_-]+, not \"Ethereum\"\n",
				"chains[0].chain_id: required, must be > 0\n",
				"chains[0].remotes[0].url: must be http(s):// or ws(s)://\n",
			},
			notStderr: []string{"SECRETKEY"},
		},
		{
			name:       "check-config missing file",
			give:       []string{"check-config", filepath.Join(t.TempDir(), "absent.yaml")},
			wantCode:   1,
			wantStderr: []string{"absent.yaml"},
		},
		{
			name:       "check-config without a file",
			give:       []string{"check-config"},
			wantCode:   2,
			wantStderr: []string{"usage: venn check-config FILE"},
		},
		{
			name:       "unknown subcommand",
			give:       []string{"frobnicate"},
			wantCode:   2,
			wantStderr: []string{`unknown command "frobnicate"`, "Usage:"},
		},
		{
			name:       "no subcommand",
			give:       nil,
			wantCode:   2,
			wantStderr: []string{"Usage:"},
		},
		{
			name:       "help",
			give:       []string{"help"},
			wantCode:   0,
			wantStdout: []string{"venn serve [--config FILE]", "venn check-config FILE"},
		},
		{
			name:       "version",
			give:       []string{"version"},
			wantCode:   0,
			wantStdout: []string{"venn "},
		},
		{
			name:       "serve with a bad config",
			give:       []string{"serve", "--config", bad},
			wantCode:   1,
			wantStderr: []string{"chains[0].chain_id: required"},
		},
		{
			name:       "serve with a stray argument",
			give:       []string{"serve", "extra"},
			wantCode:   2,
			wantStderr: []string{`unexpected argument "extra"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.give, &stdout, &stderr); got != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", got, tt.wantCode, &stdout, &stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout %q lacks %q", &stdout, w)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", &stderr, w)
				}
			}
			for _, w := range tt.notStderr {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr shows %q: %s", w, &stderr)
				}
			}
		})
	}
}

func TestServeFailsOnTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := writeFile(t, `
listen: `+ln.Addr().String()+`
metrics_listen: ""
chains:
  - name: test
    chain_id: 1337
    remotes: [{name: a, url: "http://127.0.0.1:1"}]
`)
	var stdout, stderr bytes.Buffer
	if got := run([]string{"serve", "--config", cfg}, &stdout, &stderr); got != 1 {
		t.Errorf("exit code = %d, want 1\nstderr: %s", got, &stderr)
	}
	if !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("stderr %q does not say why", &stderr)
	}
}

// TestServeStopsOnSIGTERM runs the real serve path and checks that SIGTERM
// drains it and exits 0.
func TestServeStopsOnSIGTERM(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // freed for venn; a clash would fail the test, not hang it
	cfg := writeFile(t, `
listen: `+addr+`
metrics_listen: ""
shutdown_timeout: 5s
chains:
  - name: test
    chain_id: 1337
    remotes: [{name: a, url: "http://127.0.0.1:1"}]
`)
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"serve", "--config", cfg}, &stdout, &stderr) }()

	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Post("http://"+addr+"/test", "application/json",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `"0x539"`) {
				t.Fatalf("eth_chainId answered %s", body)
			}
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d before answering: %s", code, &stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("serve never answered")
		}
	}
	client.CloseIdleConnections()

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A drain that overran shutdown_timeout exits non-zero; the bound
	// below only keeps a hang from hanging the test, with room for a
	// loaded machine's slowest stop.
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code = %d, want 0\nstderr: %s", code, &stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop on SIGTERM") // its stderr is still being written
	}
}

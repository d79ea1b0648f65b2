// Package gethtest starts a real geth in --dev mode for end-to-end tests.
//
// The binary is the pinned geth v1.17.10: $VENN_GETH, else
// ~/.cache/venn-conformance/bin/geth (built by scripts/test.sh). A missing
// binary fails the test rather than skipping it, so a CI run without geth
// cannot pass by testing nothing. Every process Start launches is killed and
// waited for by a t.Cleanup; nothing outlives the test.
package gethtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/venn-gateway/venn/internal/freeport"
)

// ChainID is the chain id of every geth --dev chain.
const ChainID = 1337

// Bounds of Start. geth --dev usually answers within a second; a loaded
// two-core machine can take several.
const (
	// startAttempts covers the race between picking a free port and geth
	// binding it.
	startAttempts = 3
	// readyTimeout bounds one attempt's wait for eth_chainId to answer.
	readyTimeout = 30 * time.Second
	// readyPoll is the interval between readiness probes.
	readyPoll = 50 * time.Millisecond
	// callTimeout bounds one Call when the caller's context has no deadline.
	callTimeout = 10 * time.Second
	// logTailBytes is how much of geth's log a failure prints.
	logTailBytes = 4 << 10
	// maxReplyBytes bounds a reply read by Call.
	maxReplyBytes = 32 << 20
)

// envBinary names the variable that overrides the binary's path.
const envBinary = "VENN_GETH"

// Options configure one geth.
type Options struct {
	// Period is the dev block period, in whole seconds; 0 mines a block
	// only when a transaction is pending.
	Period time.Duration
}

// Geth is one running geth --dev process.
type Geth struct {
	cmd     *exec.Cmd
	httpURL string
	wsURL   string
	logPath string
	client  *http.Client
	nextID  atomic.Int64

	done    chan struct{} // closed when the process has been waited for
	waitErr error         // set before done is closed
}

// Binary returns the geth binary's path, or an error saying how to get it.
func Binary() (string, error) {
	path := os.Getenv(envBinary)
	if path == "" {
		home, err := os.UserHomeDir()
		if err == nil {
			path = filepath.Join(home, ".cache", "venn-conformance", "bin", "geth")
		}
	}
	if path != "" {
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", errors.New("geth v1.17.10 not found: run scripts/test.sh (it builds it) or set VENN_GETH")
}

// Start launches geth --dev on free 127.0.0.1 ports and returns once it
// answers eth_chainId. The process is killed when the test ends.
func Start(t testing.TB, opts Options) *Geth {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Period < 0 || opts.Period%time.Second != 0 {
		t.Fatalf("gethtest: Period must be whole seconds, not %v", opts.Period)
	}
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		g, err := start(t, bin, opts)
		if err == nil {
			return g
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
	}
	t.Fatalf("gethtest: start geth: %v", errors.Join(errs...))
	return nil
}

func start(t testing.TB, bin string, opts Options) (*Geth, error) {
	ports, err := freeport.Ports(3)
	if err != nil {
		return nil, err
	}
	httpPort, wsPort, authPort := ports[0], ports[1], ports[2]
	dir := t.TempDir()
	logPath := filepath.Join(dir, "geth.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor

	args := []string{
		"--dev", "--dev.period", strconv.FormatInt(int64(opts.Period/time.Second), 10),
		"--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(httpPort),
		"--http.api", "eth,net,web3,debug,txpool",
		"--ws", "--ws.addr", "127.0.0.1", "--ws.port", strconv.Itoa(wsPort),
		"--ws.api", "eth,net,web3",
		"--ipcdisable", "--nodiscover", "--maxpeers", "0", "--port", "0",
		"--authrpc.addr", "127.0.0.1", "--authrpc.port", strconv.Itoa(authPort),
		"--datadir", filepath.Join(dir, "data"),
		// A nearly full disk on a CI machine must not stop the node.
		"--datadir.minfreedisk", "0",
		"--verbosity", "2",
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	g := &Geth{
		cmd:     cmd,
		httpURL: "http://127.0.0.1:" + strconv.Itoa(httpPort),
		wsURL:   "ws://127.0.0.1:" + strconv.Itoa(wsPort),
		logPath: logPath,
		client:  &http.Client{Transport: &http.Transport{}},
		done:    make(chan struct{}),
	}
	go func() {
		g.waitErr = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		g.Kill()
		if t.Failed() {
			t.Logf("geth pid %d log tail:\n%s", g.PID(), g.logTail())
		}
		g.client.CloseIdleConnections()
	})

	if err := g.waitReady(); err != nil {
		g.Kill()
		return nil, fmt.Errorf("%w; log tail:\n%s", err, g.logTail())
	}
	return g, nil
}

// waitReady polls eth_chainId until geth answers 1337, exits, or
// readyTimeout passes. Receipt lookups may still answer "transaction
// indexing is in progress": on a dev chain that lasts until the first block.
func (g *Geth) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		probe, cancelProbe := context.WithTimeout(ctx, time.Second)
		res, err := g.Call(probe, "eth_chainId")
		cancelProbe()
		if err == nil {
			var id string
			if json.Unmarshal(res, &id) == nil && id == "0x"+strconv.FormatInt(ChainID, 16) {
				return nil
			}
			return fmt.Errorf("eth_chainId answered %s, want 0x539", res)
		}
		select {
		case <-g.done:
			return fmt.Errorf("geth exited before answering: %v", g.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("geth did not answer eth_chainId within %v: %w", readyTimeout, err)
		case <-tick.C:
		}
	}
}

// HTTPURL is geth's JSON-RPC over HTTP endpoint.
func (g *Geth) HTTPURL() string { return g.httpURL }

// WSURL is geth's JSON-RPC over WebSocket endpoint.
func (g *Geth) WSURL() string { return g.wsURL }

// PID is the geth process id.
func (g *Geth) PID() int { return g.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to exit. It is safe to call
// more than once and after the process has died.
func (g *Geth) Kill() {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Kill() // fails only when the process is already gone
	<-g.done
}

// Exited reports whether the process has exited.
func (g *Geth) Exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// RPCError is an error answer from geth.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return "geth error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// Call makes one JSON-RPC call over HTTP and returns the raw result. An
// error answer is returned as *RPCError.
//
// geth bounds a call over HTTP by its server's write timeout (30 s), after
// which it answers -32002 "request timed out" however long the caller would
// wait; CallWS has no such bound.
func (g *Geth) Call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	body, err := g.request(method, params)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.httpURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", method, err)
	}
	return reply(method, fmt.Sprintf("HTTP %d", resp.StatusCode), raw)
}

// CallWS is Call over a WebSocket of its own, bounded only by ctx (and by
// callTimeout when ctx has none): geth puts no deadline on a call over
// WebSocket, so a call that is slow on a loaded machine (the first blob
// transaction geth signs loads its KZG setup) is waited for, not cut off
// by geth's HTTP server.
func (g *Geth) CallWS(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	body, err := g.request(method, params)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	conn, _, err := websocket.Dial(ctx, g.wsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: dial: %w", method, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxReplyBytes)
	if err := conn.Write(ctx, websocket.MessageText, body); err != nil {
		return nil, fmt.Errorf("%s: write: %w", method, err)
	}
	// The connection carries this one call and no subscription: the first
	// message is its answer.
	_, raw, err := conn.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", method, err)
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
	return reply(method, "WebSocket", raw)
}

// request encodes one call with the next id.
func (g *Geth) request(method string, params []any) ([]byte, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": g.nextID.Add(1), "method": method, "params": params,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: encode: %w", method, err)
	}
	return body, nil
}

// reply decodes one answer; via says how it came, for the error.
func reply(method, via string, raw []byte) (json.RawMessage, error) {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: decode %.200q: %w", method, via, raw, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	return r.Result, nil
}

// CallJSON is Call with the params given as one JSON array, as a client
// sends them.
func (g *Geth) CallJSON(ctx context.Context, method, params string) (json.RawMessage, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(params), &raw); err != nil {
		return nil, fmt.Errorf("%s: params %s: %w", method, params, err)
	}
	args := make([]any, len(raw))
	for i, p := range raw {
		args[i] = p
	}
	return g.Call(ctx, method, args...)
}

// MustCall is Call that fails the test on any error.
func (g *Geth) MustCall(t testing.TB, method string, params ...any) json.RawMessage {
	t.Helper()
	res, err := g.Call(context.Background(), method, params...)
	if err != nil {
		t.Fatalf("geth %s: %v", method, err)
	}
	return res
}

// logTail returns the end of geth's log.
func (g *Geth) logTail() string {
	f, err := os.Open(g.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTailBytes {
		_, _ = f.Seek(-logTailBytes, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

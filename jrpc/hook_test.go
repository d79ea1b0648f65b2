package jrpc

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

type hookKey struct{}

// recordingHook keeps what it was told of each call, and checks that the
// handler and EndCall get the context StartCall returned, and EndCall its
// CallInfo.
type recordingHook struct {
	mu    sync.Mutex
	calls []string
}

func (h *recordingHook) StartCall(ctx context.Context, c CallInfo) context.Context {
	return context.WithValue(ctx, hookKey{}, c)
}

func (h *recordingHook) EndCall(ctx context.Context, c CallInfo, outcome string, code int) {
	started, _ := ctx.Value(hookKey{}).(CallInfo)
	reqID := "reqid"
	if c.RequestID == "" || c.RequestID != RequestID(ctx) {
		reqID = "no-reqid"
	}
	note := "note"
	if c.Note == nil || c.Note != NoteOf(ctx) {
		note = "no-note"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if started.Chain != c.Chain || started.Method != c.Method || started.Index != c.Index ||
		started.RequestID != c.RequestID || started.Note != c.Note {
		h.calls = append(h.calls, "EndCall's CallInfo is not StartCall's")
	}
	h.calls = append(h.calls, strings.Join([]string{c.Chain, c.Method, strconv.Itoa(c.Index), c.Transport,
		c.Header.Get("X-Probe"), reqID, note, outcome, strconv.Itoa(code)}, " "))
}

// TestCallHook: the hook sees every valid call with its bounded method
// label, its place in a batch and its outcome; invalid items never reach
// it.
func TestCallHook(t *testing.T) {
	hook := &recordingHook{}
	labels := func(m string) string {
		if m == "sum" || m == "test_echo" {
			return m
		}
		return ""
	}
	ts := newTestServer(t, Options{Hook: hook, MethodLabel: labels}, HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if _, ok := ctx.Value(hookKey{}).(CallInfo); !ok {
			t.Error("the handler did not get StartCall's context")
		}
		return echoHandler().ServeRPC(ctx, req)
	}))
	ts.post(t, `{"jsonrpc":"2.0","id":1,"method":"sum","params":[1,2]}`) // alone: index -1
	ts.post(t, `[{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]},{"jsonrpc":"2.0","id":2,"method":"made_up_method"},{"bad":1}]`)
	hook.mu.Lock()
	got := slices.Clone(hook.calls)
	hook.mu.Unlock()
	slices.Sort(got)
	want := []string{
		"test other 1 http  reqid note invalid -32601",
		"test sum -1 http  reqid note ok 0",
		"test test_echo 0 http  reqid note ok 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("hook saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

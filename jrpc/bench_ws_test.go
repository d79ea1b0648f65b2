package jrpc

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// BenchmarkServeWS is one call and its answer over an open WebSocket
// connection, through a Gate: the per-message path a reload's readmission
// (Readmit, reload.go) must not slow.
func BenchmarkServeWS(b *testing.B) {
	s := NewServer(Options{Gate: openGate{}})
	s.Handle("eth", HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) {
		return benchResult, nil
	}))
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/eth", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	msg := []byte(benchCall)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// openGate admits everyone and lets every call through.
type openGate struct{}

func (openGate) KeysInPath() bool { return false }

func (openGate) Admit(*http.Request, Admission) (Caller, *Refusal) { return openCaller{}, nil }

type openCaller struct{}

func (openCaller) Key() string                          { return "" }
func (openCaller) ClientIP() netip.Addr                 { return netip.Addr{} }
func (openCaller) Take(context.Context, int) *Refusal   { return nil }
func (openCaller) Check(string, json.RawMessage) *Error { return nil }

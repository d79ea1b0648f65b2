package jrpc

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestNoteHeaders checks that a single call's answer carries the cache's
// word the handler noted (none when it noted nothing), that a batch
// carries none, and that a client's no-cache reaches the handler.
func TestNoteHeaders(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		n := NoteOf(ctx)
		if n == nil {
			t.Error("a call served over HTTP has no note")
		}
		if req.Method == "cached" {
			if SkipCache(ctx) {
				n.Cached("bypass")
			} else {
				n.Cached("hit")
			}
		}
		return json.RawMessage(`"0x1"`), nil
	})
	s := newTestServer(t, Options{DiagnosticHeaders: true}, h)
	tests := []struct {
		name   string
		body   string
		header http.Header
		want   string
	}{
		{"noted", callOf("cached"), nil, "hit"},
		{"not cacheable", callOf("other"), nil, "none"},
		{"batch", "[" + callOf("cached") + "]", nil, ""},
		{"cache-control", callOf("cached"), http.Header{"Cache-Control": {"max-age=0, no-cache"}}, "bypass"},
		{"skip header", callOf("cached"), http.Header{"X-Venn-Skip-Cache": {"true"}}, "bypass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.url(), strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tt.header.Clone()
			if req.Header == nil {
				req.Header = http.Header{}
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := s.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get(cacheHeader); got != tt.want {
				t.Errorf("%s = %q, want %q", cacheHeader, got, tt.want)
			}
		})
	}
}

// TestNoteNilSafe checks that a call without a note can be noted: calls
// venn builds itself are served outside a transport.
func TestNoteNilSafe(t *testing.T) {
	n := NoteOf(context.Background())
	n.Answered("head")
	n.Cached("hit")
	n.Upstream("a", 1)
	n.Merge(&Note{Attempts: 1})
	if n != nil {
		t.Fatal("a bare context has a note")
	}
	if ctx := context.Background(); NewBranches(ctx, 2).Context(ctx, 1) != ctx {
		t.Fatal("a branch of a call without a note has one")
	}
}

// TestNoteUpstream checks that upstream exchanges and branches add up:
// attempts summed, each remote named once.
func TestNoteUpstream(t *testing.T) {
	var n Note
	ctx := withNote(context.Background(), &n)
	NoteOf(ctx).Upstream("", 2) // a too-large answer, then a split
	parts := NewBranches(ctx, 3)
	for i, name := range []string{"b", "a", "b"} {
		NoteOf(parts.Context(ctx, i)).Upstream(name, 1)
	}
	parts.Merge(ctx)
	n.Merge(&Note{Remote: "a,c", Attempts: 2})
	if n.Remote != "b,a,c" || n.Attempts != 7 {
		t.Fatalf("note %+v, want remotes b,a,c and 7 attempts", n)
	}
}

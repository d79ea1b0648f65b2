package jrpc

import (
	"context"
	"net/http"
	"strings"
)

// Note is what the parts of venn that answer a call say about how they
// answered it, for the answer's diagnostic headers, the request log and
// traces. Each call served gets its own, in its context; it is written only
// by the goroutine serving the call (racing attempts report to it), so it
// needs no lock. Work that serves parts of one call on goroutines of its
// own (a split eth_getLogs, a block's receipts one by one) gives each its
// own note (Branch) and merges them back once they are done (Merge). The
// methods are safe on a nil Note: a call served outside a transport (a
// test, a call venn builds) has none.
type Note struct {
	// Source is the part that answered: head, history, cache, forger,
	// remotes or local ("": not answered).
	Source string
	// Cache is the response cache's word: hit, miss or bypass; "" when the
	// call is not one the cache keeps.
	Cache string
	// Remote names the remote whose answer was served; when the answer
	// was built from several (the parts of a split eth_getLogs), their
	// names joined by commas, each once. Names, never URLs; at most one
	// per remote of the chain.
	Remote string
	// Attempts counts the upstream attempts the call made.
	Attempts int
}

type noteKey struct{}

// NoteOf returns the call's note; nil when it has none.
func NoteOf(ctx context.Context) *Note {
	n, _ := ctx.Value(noteKey{}).(*Note)
	return n
}

// withNote gives a call its note.
func withNote(ctx context.Context, n *Note) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// WithNote gives ctx's call the note n, for a call served outside a
// transport that wants to know how it was answered (a test, a tool).
func WithNote(ctx context.Context, n *Note) context.Context { return withNote(ctx, n) }

// Answered records the part that answered the call.
func (n *Note) Answered(source string) {
	if n != nil {
		n.Source = source
	}
}

// Cached records the response cache's word on the call.
func (n *Note) Cached(word string) {
	if n != nil {
		n.Cache = word
	}
}

// Upstream records one upstream exchange of the call: the remote whose
// answer was served ("" when none was) and the attempts it made. A call
// that goes upstream more than once (a range split after a too-large
// answer, a block's receipts fetched one by one) adds them up.
func (n *Note) Upstream(remote string, attempts int) {
	if n != nil {
		n.Attempts += attempts
		n.addRemote(remote)
	}
}

// Merge adds what a branch of the call (Branch) noted, once the branch's
// goroutine is done: its attempts and remotes. The source and the cache's
// word stay the call's own.
func (n *Note) Merge(b *Note) {
	if n != nil && b != nil {
		n.Attempts += b.Attempts
		for rest := b.Remote; rest != ""; {
			var name string
			name, rest, _ = strings.Cut(rest, ",")
			n.addRemote(name)
		}
	}
}

// addRemote adds name to the remotes served, once.
func (n *Note) addRemote(name string) {
	switch {
	case name == "" || n.Remote == name:
	case n.Remote == "":
		n.Remote = name
	default:
		for rest := n.Remote; rest != ""; {
			var have string
			have, rest, _ = strings.Cut(rest, ",")
			if have == name {
				return
			}
		}
		n.Remote += "," + name
	}
}

// Branches are the notes of n parts of one call served on goroutines of
// their own: part i serves under Context(ctx, i), and once every part is
// done the call's goroutine calls Merge. nil (free) when the call has no
// note.
type Branches []Note

// NewBranches returns the notes of ctx's call's n parts.
func NewBranches(ctx context.Context, n int) Branches {
	if NoteOf(ctx) == nil {
		return nil
	}
	return make(Branches, n)
}

// Context is ctx for part i.
func (b Branches) Context(ctx context.Context, i int) context.Context {
	if b == nil {
		return ctx
	}
	return withNote(ctx, &b[i])
}

// Merge adds every part's note to the call's, on the call's goroutine
// once the parts are done.
func (b Branches) Merge(ctx context.Context) {
	n := NoteOf(ctx)
	for i := range b {
		n.Merge(&b[i])
	}
}

type skipCacheKey struct{}

// SkipCache reports whether the client asked that the response cache not
// be read for its calls (the fresh answer is still stored).
func SkipCache(ctx context.Context) bool {
	skip, _ := ctx.Value(skipCacheKey{}).(bool)
	return skip
}

// withSkipCache marks ctx's calls as bypassing cache reads when the request
// says so: X-Venn-Skip-Cache: true, or, where cacheControl (a POST, not a
// WebSocket upgrade, which browsers always send with no-cache),
// Cache-Control: no-cache or no-store.
func withSkipCache(ctx context.Context, h http.Header, cacheControl bool) context.Context {
	cc := h.Get("Cache-Control")
	if strings.EqualFold(strings.TrimSpace(h.Get("X-Venn-Skip-Cache")), "true") ||
		cacheControl && (hasToken(cc, "no-cache") || hasToken(cc, "no-store")) {
		return context.WithValue(ctx, skipCacheKey{}, true)
	}
	return ctx
}

// hasToken reports whether the comma-separated header value v holds token,
// case-insensitively.
func hasToken(v, token string) bool {
	for v != "" {
		var t string
		t, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

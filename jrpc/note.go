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
// needs no lock. The methods are safe on a nil Note: a call served outside
// a transport (a test, a call venn builds) has none.
type Note struct {
	// Source is the part that answered: head, history, cache, forger,
	// remotes or local ("": not answered).
	Source string
	// Cache is the response cache's word: hit, miss or bypass; "" when the
	// call is not one the cache keeps.
	Cache string
	// Remote is the name of the remote whose answer was served.
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

// Upstream records the remote whose answer was served and the attempts
// the call made.
func (n *Note) Upstream(remote string, attempts int) {
	if n != nil {
		n.Remote, n.Attempts = remote, attempts
	}
}

// cacheHeader is the single-call answer's word on the response cache:
// hit, miss, bypass, or none for calls the cache does not keep.
const cacheHeader = "X-Venn-Cache"

// writeNote sets the diagnostic headers of a single call's answer.
func writeNote(h http.Header, n *Note) {
	word := n.Cache
	if word == "" {
		word = "none"
	}
	h.Set(cacheHeader, word)
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

package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// loopbackCaller names the caller of an API without tokens: it serves on
// loopback only, so the caller is someone on this host.
const loopbackCaller = "loopback"

type callerKey struct{}

// caller is the name of the token the request came with.
func caller(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

func withCaller(r *http.Request, name string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, name))
}

// tokenName returns the name of the configured token got is, "" for none.
// Tokens are compared by their hashes, in constant time, against every
// token, so timing tells nothing of a near miss.
func (a *Admin) tokenName(got string) string {
	if got == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(got))
	name := ""
	for _, t := range *a.tokens.Load() {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			name = t.name
		}
	}
	return name
}

// token is a configured token as the API compares it.
type token struct {
	name string
	sum  [sha256.Size]byte
}

func tokensOf(ts []Token) *[]token {
	out := make([]token, len(ts))
	for i, t := range ts {
		out[i] = token{name: t.Name, sum: sha256.Sum256([]byte(t.Token))}
	}
	return &out
}

// SetTokens makes ts the tokens the API and the page take from now on (a
// hot reload's), and signs out the page's sessions of a token no longer
// among them. Going from tokens to none or back is refused (false): the
// API without tokens must listen on loopback only, which is decided when
// the listener is bound; it takes a restart.
func (a *Admin) SetTokens(ts []Token) bool {
	if (len(ts) == 0) != a.open() {
		return false
	}
	next := tokensOf(ts)
	a.tokens.Store(next)
	a.pages.keep(func(sum [sha256.Size]byte) bool {
		for _, t := range *next {
			if t.sum == sum {
				return true
			}
		}
		return false
	})
	return true
}

// open reports whether the API takes no token (it serves on loopback
// only: the app's config check).
func (a *Admin) open() bool { return len(*a.tokens.Load()) == 0 }

// authenticate lets a request through with a configured bearer token, and
// records the token's name for the action's log line. Without tokens every
// request goes through as loopbackCaller.
func (a *Admin) authenticate(action func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() {
			next.ServeHTTP(w, withCaller(r, loopbackCaller))
			return
		}
		got, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name := a.tokenName(got)
		if name == "" || !bearer {
			if act := action(r); act != "" {
				a.m.actions.WithLabelValues(act, outcomeUnauthorized).Inc()
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="venn admin"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, withCaller(r, name))
	})
}

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
	for i, t := range a.opts.Config.Tokens {
		want := sha256.Sum256([]byte(t.Token))
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			name = a.opts.Config.Tokens[i].Name
		}
	}
	return name
}

// open reports whether the API takes no token (it serves on loopback
// only: the app's config check).
func (a *Admin) open() bool { return len(a.opts.Config.Tokens) == 0 }

// authenticate lets a request through with a configured bearer token, and
// records the token's name for the action's log line. Without tokens every
// request goes through as loopbackCaller.
func (a *Admin) authenticate(action func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() {
			next.ServeHTTP(w, withCaller(r, loopbackCaller))
			return
		}
		got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name := a.tokenName(got)
		if name == "" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
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

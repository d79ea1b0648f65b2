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

// authenticate lets a request through with a configured bearer token, and
// records the token's name for the action's log line. Without tokens every
// request goes through (the listener is loopback only: Config.Validate's
// caller checks). Tokens are compared by their hashes, in constant time,
// against every token, so timing tells nothing of a near miss.
func (a *Admin) authenticate(action func(*http.Request) string, next http.Handler) http.Handler {
	tokens := a.opts.Config.Tokens
	sums := make([][32]byte, len(tokens))
	for i, t := range tokens {
		sums[i] = sha256.Sum256([]byte(t.Token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(tokens) == 0 {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, loopbackCaller)))
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		name := ""
		for i, s := range sums {
			if subtle.ConstantTimeCompare(sum[:], s[:]) == 1 && ok && got != "" {
				name = tokens[i].Name
			}
		}
		if name == "" {
			if act := action(r); act != "" {
				a.m.actions.WithLabelValues(act, outcomeUnauthorized).Inc()
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="venn admin"`)
			writeError(w, http.StatusUnauthorized, "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, name)))
	})
}

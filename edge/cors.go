package edge

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cors is a CORS ready to use; nil when no origin is allowed.
type cors struct {
	any       bool
	exact     map[string]bool // lower case
	wildcards []wildcardOrigin
	headers   string // Access-Control-Allow-Headers
	maxAge    string
}

// wildcardOrigin is "scheme://*.domain": any subdomain, not the domain.
type wildcardOrigin struct{ scheme, suffix string } // "https://", ".example.com"

func newCORS(c CORS, keyHeader string) *cors {
	if len(c.AllowedOrigins) == 0 {
		return nil
	}
	out := &cors{exact: make(map[string]bool)}
	for _, o := range c.AllowedOrigins {
		o = strings.ToLower(strings.TrimRight(o, "/"))
		if o == "*" {
			out.any = true
			continue
		}
		if scheme, host, ok := strings.Cut(o, "://"); ok && strings.HasPrefix(host, "*.") {
			out.wildcards = append(out.wildcards, wildcardOrigin{scheme: scheme + "://", suffix: host[1:]})
			continue
		}
		out.exact[o] = true
	}
	headers := []string{"Content-Type", http.CanonicalHeaderKey(keyHeader)}
	for _, h := range c.AllowedHeaders {
		headers = append(headers, http.CanonicalHeaderKey(h))
	}
	out.headers = strings.Join(headers, ", ")
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultCORSMaxAge
	}
	out.maxAge = strconv.Itoa(int(maxAge / time.Second))
	return out
}

// allows reports whether a page from origin may call venn. A nil cors
// allows none.
func (c *cors) allows(origin string) bool {
	if c == nil || origin == "" {
		return false
	}
	if c.any {
		return true
	}
	o := strings.ToLower(origin)
	if c.exact[o] {
		return true
	}
	for _, w := range c.wildcards {
		if host, ok := strings.CutPrefix(o, w.scheme); ok &&
			len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			return true
		}
	}
	return false
}

// wrap answers preflights itself and marks answers to allowed origins.
// Requests without an Origin (every non-browser client) pass untouched.
// A nil cors adds nothing.
func (c *cors) wrap(next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := headerValue(r.Header, "Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		allowed := c.allows(origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			h.Set("Access-Control-Allow-Origin", c.allowOrigin(origin))
			h.Set("Access-Control-Allow-Methods", "POST")
			h.Set("Access-Control-Allow-Headers", c.headers)
			h.Set("Access-Control-Max-Age", c.maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", c.allowOrigin(origin))
			h.Set("Access-Control-Expose-Headers", exposedHeaders)
		}
		next.ServeHTTP(w, r)
	})
}

// exposedHeaders are the answer's headers a page may read: the back-off,
// the request id and jrpc's diagnostic headers.
const exposedHeaders = "Retry-After, X-Request-Id, X-Venn-Source, X-Venn-Remote, X-Venn-Attempts, " +
	creditsHeader + ", " +
	"X-Venn-Duration-Ms, X-Venn-Cache, X-Venn-Sources"

func (c *cors) allowOrigin(origin string) string {
	if c.any {
		return "*"
	}
	return origin
}

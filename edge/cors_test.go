package edge

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestCORS(t *testing.T) {
	s := newTestServer(t, Config{
		CORS: CORS{
			AllowedOrigins: []string{"https://app.example.com", "https://*.dapp.example"},
			AllowedHeaders: []string{"x-client-version"},
			MaxAge:         time.Hour,
		},
		Auth: AuthConfig{Keys: []APIKey{{Name: "alice", Key: aliceSecret}}},
	}, Options{}, echoHandler())
	preflight := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "content-type, x-api-key"}
	}
	tests := []struct {
		name       string
		give       httpCall
		wantStatus int
		wantHeader map[string]string // "" means absent
	}{
		{name: "preflight from an allowed origin", give: httpCall{method: "OPTIONS", header: preflight("https://app.example.com")},
			wantStatus: 204, wantHeader: map[string]string{
				"Access-Control-Allow-Origin":      "https://app.example.com",
				"Access-Control-Allow-Methods":     "POST",
				"Access-Control-Allow-Headers":     "Content-Type, X-Api-Key, X-Client-Version",
				"Access-Control-Max-Age":           "3600",
				"Access-Control-Allow-Credentials": "",
			}},
		{name: "preflight with a key in the path", give: httpCall{method: "OPTIONS", path: "/test/" + aliceSecret, header: preflight("https://app.example.com")},
			wantStatus: 204, wantHeader: map[string]string{"Access-Control-Allow-Origin": "https://app.example.com"}},
		{name: "preflight from a subdomain", give: httpCall{method: "OPTIONS", header: preflight("https://a.b.dapp.example")},
			wantStatus: 204, wantHeader: map[string]string{"Access-Control-Allow-Origin": "https://a.b.dapp.example"}},
		{name: "wildcard is not the apex", give: httpCall{method: "OPTIONS", header: preflight("https://dapp.example")},
			wantStatus: 403, wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "wildcard keeps its scheme", give: httpCall{method: "OPTIONS", header: preflight("http://a.dapp.example")},
			wantStatus: 403, wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "preflight from another origin", give: httpCall{method: "OPTIONS", header: preflight("https://evil.example")},
			wantStatus: 403, wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "call from an allowed origin", give: httpCall{header: map[string]string{"Origin": "https://app.example.com", "X-Api-Key": aliceSecret}, body: callOf("test_echo")},
			wantStatus: 200, wantHeader: map[string]string{"Access-Control-Allow-Origin": "https://app.example.com",
				"Access-Control-Expose-Headers": exposedHeaders, "Vary": "Origin"}},
		{name: "refusal still readable by the page", give: httpCall{header: map[string]string{"Origin": "https://app.example.com"}, body: callOf("test_echo")},
			wantStatus: 401, wantHeader: map[string]string{"Access-Control-Allow-Origin": "https://app.example.com"}},
		{name: "call from another origin has no CORS headers", give: httpCall{header: map[string]string{"Origin": "https://evil.example", "X-Api-Key": aliceSecret}, body: callOf("test_echo")},
			wantStatus: 200, wantHeader: map[string]string{"Access-Control-Allow-Origin": ""}},
		{name: "OPTIONS that is no preflight", give: httpCall{method: "OPTIONS", header: map[string]string{"Origin": "https://app.example.com"}},
			wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := do(t, s, tt.give)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d (%s)", status, tt.wantStatus, body)
			}
			for k, want := range tt.wantHeader {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestCORSDefault(t *testing.T) {
	s := newTestServer(t, Config{}, Options{}, echoHandler())
	status, h, _ := do(t, s, httpCall{method: "OPTIONS", header: map[string]string{
		"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}})
	if status != http.StatusMethodNotAllowed || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without cors = %d, ACAO %q; want 405 and none", status, h.Get("Access-Control-Allow-Origin"))
	}
	status, h, _ = do(t, s, httpCall{header: map[string]string{"Origin": "https://app.example.com"}, body: callOf("test_echo")})
	if status != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("call without cors = %d, ACAO %q; want 200 and none", status, h.Get("Access-Control-Allow-Origin"))
	}

	any := newTestServer(t, Config{CORS: CORS{AllowedOrigins: []string{"*"}}}, Options{}, echoHandler())
	status, h, _ = do(t, any, httpCall{method: "OPTIONS", header: map[string]string{
		"Origin": "https://anything.example", "Access-Control-Request-Method": "POST"}})
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("preflight with * = %d %v", status, h)
	}
}

// TestWSOrigin: browsers cannot preflight a WebSocket, so the upgrade is
// refused to an origin CORS does not allow; clients without Origin pass.
func TestWSOrigin(t *testing.T) {
	open := newTestServer(t, Config{}, Options{}, echoHandler())
	allowing := newTestServer(t, Config{CORS: CORS{AllowedOrigins: []string{"https://app.example.com"}}}, Options{}, echoHandler())
	tests := []struct {
		name   string
		s      *testServer
		origin string
		want   int // HTTP status of the upgrade
	}{
		{name: "no origin", s: open, want: http.StatusSwitchingProtocols},
		{name: "browser, no cors", s: open, origin: "https://app.example.com", want: http.StatusForbidden},
		{name: "allowed origin", s: allowing, origin: "https://app.example.com", want: http.StatusSwitchingProtocols},
		{name: "other origin", s: allowing, origin: "https://evil.example", want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var opts websocket.DialOptions
			if tt.origin != "" {
				opts.HTTPHeader = http.Header{"Origin": {tt.origin}}
			}
			c, resp, err := websocket.Dial(ctx, tt.s.wsURL(), &opts)
			if c != nil {
				defer c.CloseNow()
			}
			if resp == nil {
				t.Fatalf("dial: %v", err)
			}
			if resp.StatusCode != tt.want {
				t.Errorf("upgrade = %d, want %d (%v)", resp.StatusCode, tt.want, err)
			}
		})
	}
}

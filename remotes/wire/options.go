package wire

import (
	"log/slog"
	"net/http"

	"github.com/venn-gateway/venn/tracing"
)

// Options configures one remote's transport.
type Options struct {
	// Name labels the remote in errors and logs. The URL never does: it
	// carries API keys.
	Name string
	// URL is http(s):// or ws(s)://.
	URL string
	// Headers go on every HTTP request and on the WebSocket handshake.
	Headers http.Header
	// MaxIdleConns is the HTTP keep-alive pool size (default 256).
	MaxIdleConns int
	// MaxResponseBytes caps a reply body or WebSocket message (default 64
	// MiB), on the wire and inflated.
	MaxResponseBytes int64
	// Budget bounds the bytes of replies being read across the process; nil
	// is unlimited. MaxResponseBytes is cut to its size.
	Budget *ReplyBudget
	// OtherURLs are the remote's other URLs (its ws_url, or its url for the
	// heads connection): a remote may echo any of its keys, so the
	// redactor knows them all.
	OtherURLs []string
	Logger    *slog.Logger
	// Tracer, when it propagates, puts the trace context on HTTP requests.
	Tracer *tracing.Tracer
	// Forward copies client headers onto HTTP requests (passthrough.go);
	// nil: none.
	Forward *Forwarding
	// OnRedial, when set, is called when a WebSocket transport's new
	// connection replaces a lost one; OnSubscribed, when a heads watcher's
	// subscription is confirmed (the first one too). Either may be another
	// endpoint than the one checked before (chaincheck.go). They must not
	// block.
	OnRedial, OnSubscribed func()
	// Bill, when set, is called by a subscription with eth_subscribe for
	// each subscribe request it sends and with eth_subscription for each
	// notification it receives (Remote.bill): providers bill both.
	Bill func(method string)
}

package tracing

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys on venn's spans. The rpc.* ones are OpenTelemetry's
// semantic conventions for JSON-RPC; venn.* are venn's own. Every value is
// a name from config, a number or a label from a bounded set.
const (
	KeyRPCMethod    = attribute.Key("rpc.method")             // the call span's method label (a send's is its name)
	KeyRPCErrorCode = attribute.Key("rpc.jsonrpc.error_code") // set on errors only
	KeyHTTPStatus   = attribute.Key("http.response.status_code")

	KeyChain      = attribute.Key("venn.chain")
	KeyRequestID  = attribute.Key("venn.request_id")  // the answer's X-Request-Id, as the request log has it
	KeyBatchIndex = attribute.Key("venn.batch.index") // in a batch only
	KeySource     = attribute.Key("venn.source")      // local | head | history | cache | forger | remotes
	KeyOutcome    = attribute.Key("venn.outcome")     // venn_requests_total's outcome
	KeyHit        = attribute.Key("venn.hit")         // a lookup answered

	KeyRemote  = attribute.Key("venn.remote")         // the remote's name, never its URL
	KeyAttempt = attribute.Key("venn.attempt")        // 1 for a call's first send
	KeyRole    = attribute.Key("venn.attempt.role")   // hedge | vote; none on a call's own sends
	KeyClass   = attribute.Key("venn.error.class")    // the classifier's class
	KeyReason  = attribute.Key("venn.error.reason")   // the classifier's reason
	KeyMeaning = attribute.Key("venn.attempt.result") // answer | caller | cut | missing | too_large | local | fault

	KeyBlock  = attribute.Key("venn.block")        // a block number
	KeyBlocks = attribute.Key("venn.blocks")       // how many blocks
	KeyFrom   = attribute.Key("venn.block.from")   // a range's first block
	KeyTo     = attribute.Key("venn.block.to")     // a range's last block
	KeyFetch  = attribute.Key("venn.fetch.method") // the method a stalker fetch used
)

// maxAttrs is the most attributes one Attrs holds; venn's spans carry
// fewer in any one call.
const maxAttrs = 12

// Attrs gathers a span's attributes for one SetAttributes call in a pooled
// buffer. A span is an interface, so attributes passed to it in a slice of
// the caller's own array escape, one allocation per call; the SDK copies
// what it is given, so the buffer can go back to the pool at once. Several
// attributes in one call also cost the span one lock and at most one growth
// of its slice instead of one per call.
type Attrs struct {
	kv [maxAttrs]attribute.KeyValue
	n  int
}

var attrsPool = sync.Pool{New: func() any { return new(Attrs) }}

// NewAttrs returns an empty Attrs; give it to Set once filled.
func NewAttrs() *Attrs { return attrsPool.Get().(*Attrs) }

// Add adds kv; past maxAttrs it is dropped.
func (a *Attrs) Add(kv attribute.KeyValue) {
	if a.n < len(a.kv) {
		a.kv[a.n] = kv
		a.n++
	}
}

// Set puts the attributes on sp and returns a to the pool: a is not to be
// used after.
func (a *Attrs) Set(sp trace.Span) {
	sp.SetAttributes(a.kv[:a.n]...)
	clear(a.kv[:a.n]) // no strings held in the pool
	a.n = 0
	attrsPool.Put(a)
}

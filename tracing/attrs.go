package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys on venn's spans. The rpc.* ones are OpenTelemetry's
// semantic conventions for JSON-RPC; venn.* are venn's own. Every value is
// a name from config, a number or a label from a bounded set.
const (
	KeyRPCSystem    = attribute.Key("rpc.system")             // "jsonrpc"
	KeyRPCMethod    = attribute.Key("rpc.method")             // the method's metric label
	KeyRPCErrorCode = attribute.Key("rpc.jsonrpc.error_code") // set on errors only
	KeyHTTPStatus   = attribute.Key("http.response.status_code")

	KeyChain      = attribute.Key("venn.chain")
	KeyRequestID  = attribute.Key("venn.request_id")  // the answer's X-Request-Id, as the request log has it
	KeyTransport  = attribute.Key("venn.transport")   // http | ws
	KeyBatchIndex = attribute.Key("venn.batch.index") // in a batch only
	KeySource     = attribute.Key("venn.source")      // local | head | history | cache | forger | remotes
	KeyOutcome    = attribute.Key("venn.outcome")     // venn_requests_total's outcome
	KeyHit        = attribute.Key("venn.hit")         // a lookup answered

	KeyRemote  = attribute.Key("venn.remote")         // the remote's name, never its URL
	KeyAttempt = attribute.Key("venn.attempt")        // 1 for a call's first send
	KeyRole    = attribute.Key("venn.attempt.role")   // primary | hedge | vote
	KeyClass   = attribute.Key("venn.error.class")    // the classifier's class
	KeyReason  = attribute.Key("venn.error.reason")   // the classifier's reason
	KeyMeaning = attribute.Key("venn.attempt.result") // answer | caller | cut | missing | too_large | local | fault

	KeyBlock  = attribute.Key("venn.block")        // a block number
	KeyBlocks = attribute.Key("venn.blocks")       // how many blocks
	KeyFrom   = attribute.Key("venn.block.from")   // a range's first block
	KeyTo     = attribute.Key("venn.block.to")     // a range's last block
	KeyFetch  = attribute.Key("venn.fetch.method") // the method a stalker fetch used
)

// SetSource names the part of venn that answered the call whose span ctx
// holds: nothing when off, a context lookup when that span does not
// record.
func (t *Tracer) SetSource(ctx context.Context, source string) {
	if t == nil {
		return
	}
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(KeySource.String(source))
	}
}

// Package reqlog is venn's request log: one JSON line per client call (its
// request id, chain, method, client, how venn answered it, the outcome and
// the bytes), fed by jrpc's per-call hook (jrpc.Options.OnCall).
//
// A call never waits for the log: the hook copies what the line needs into
// a bounded queue, and one goroutine the Log owns encodes and writes the
// lines; when the queue is full the line is dropped and counted
// (venn_request_log_dropped_total). The client is named by its API key's
// name or its address masked to the /24 (IPv4) or /64 (IPv6); params only
// when the config allows it, cut to a length, and a raw transaction only as
// its hash (which app tells it how to read: the log decodes no
// transaction). A line never holds a remote's URL or an API key.
package reqlog

// Package wire is how venn talks to one upstream endpoint: the HTTP and
// WebSocket transports (transport.go, transport_http.go, transport_ws.go,
// with the look at a WebSocket's socket before a write in sock.go),
// the client half of the JSON-RPC codec and reply reading under one
// process-wide reply budget (replies.go), upstream subscriptions
// (subscription.go), the client headers a call forwards (forward.go), the
// redaction of a remote's secrets from every text it sends or causes
// (redact.go), and the errors a transport returns with the kind of a
// transport fault (errors.go, failure.go).
//
// It owns one call to one remote and nothing about remotes as a group: it
// knows neither Pool nor Remote, keeps no health, picks no remote, retries
// nothing and judges no answer (remotes/verdict does). The calls it sends
// again, once, on another connection, are those a connection's loss caught
// before any reply and that are safe to send twice: over WebSocket and
// HTTP, a call that was never written; over HTTP also a read (evm's
// registry) written on a keep-alive connection the remote closed while
// idle, which net/http resends because the request is marked (replayKey).
// Its errors name a remote by its configured name, never by its URL: URLs
// carry keys.
package wire

// Package nats is venn's NATS transport. It owns the process's one
// connection to NATS (Conn: options, credentials, TLS, reconnects with
// backoff, drain on stop, the state /readyz shows) and JSON-RPC over
// request/reply on it (RPC). The chains' block feed in JetStream is
// package natsfeed's, on the same connection.
//
// Like every transport it only decodes and encodes: a request is handed
// to the same jrpc handler as an HTTP body (limits, API keys, rate
// limits, router), and the answer is published as HTTP would have sent
// it. It must not route, cache or limit calls on its own, nor touch the
// HTTP listener: NATS being away never affects HTTP serving.
//
// Subjects all start with the configured prefix (default venn):
// PREFIX.CHAIN.rpc for requests, CHAIN being the chain's name as in its
// URL path.
package nats

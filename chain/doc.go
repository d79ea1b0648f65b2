// Package chain owns one chain's lifecycle on this replica: building its
// running parts from its Config (the remotes pool, the head feed with its
// follower, leadership campaign, stalker, shared heads and JetStream feed,
// the subscriptions and filters, the response cache and the router),
// starting them, applying a reload to them in place (Reconfigure), handing
// the leadership over (Drain) and stopping them (Stop, Retire), and the
// chains' series, deleted when the last chain of a name is gone. Upstream
// is the pool and stalker alone, for the history subcommands.
//
// It must not touch configuration files or defaults (package app reads,
// defaults and validates Config), fx or any process-wide server: the
// JSON-RPC server, NATS request/reply, /readyz and the admin API are app's,
// which serves each chain's Router and reads its state.
package chain

// Package relay relays clients' subscriptions upstream for one chain: an
// eth_subscribe held on one remote's WebSocket (wire.Subscription), and,
// for newPendingTransactions where no WebSocket remote can, a
// pending-transaction filter polled over HTTP. It owns the choice among
// the remotes a relay may use (through the pool's selection, Pool.Pick),
// the backoff of the remotes whose relay failed lately, and the poller.
//
// It reaches the balancer through two small interfaces it declares: Pool
// (the chain's members, its selection, its clock and poll interval) and
// Upstream (one remote's call and subscribe, and what it is known to
// lack). It must not touch the balancer's internals: it imports no
// remotes package but the leaves wire and verdict, scores, bills and
// judges nothing, and serves no client: the subcenter fans its
// notifications out.
package relay

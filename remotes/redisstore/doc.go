// Package redisstore is the remotes' Redis adapter: what the pool shares
// among a cluster's replicas through Redis. Budgets keeps the budget
// counters (budget.Store of remotes/budget), so that every replica counts a remote's
// calls against one budget; Share shares the availability probes
// (remotes.AvailShare), so that one replica probes each remote for all.
//
// It owns the Redis commands of these two and nothing else: it spells no
// key (keyspace names them), and decides nothing about selection or
// budgets (remotes does); remotes itself links no Redis client.
package redisstore

// Package remotes is venn's load balancer over a chain's upstream RPC
// endpoints. It owns the remotes (their settings, health, limits and
// transports) and one Pool per chain: membership, the chain's head and
// each remote's lag, selection, the one judge of what a reply means, and
// one strategy per kind of call. It knows nothing of the components above
// it (router, head window, history); they call it through Pool.Call,
// CallVerified, Relays and the head tracking the pool hands out
// (Pool.Heads). It never names a remote by its URL: URLs carry keys.
//
// The rooms, in the spirit of Caddy's reverseproxy:
//
//   - pool.go: the Pool (membership, heads and lag, Start/Stop) and the
//     entry points; Pool.send chooses a call's strategy, once.
//   - route.go: what a call may be routed to (route, readRoute).
//   - select.go: selection: the tier walk, the candidate filter, the score
//     chooser; score.go computes the scores and preferred sets it reads;
//     remotes/budget (weights, budgets, cost tables, the counts flushed to
//     a budget.Store such as redisstore.Budgets) the shares it draws by
//     and the remotes it leaves for last; budget.go bills and flushes.
//   - judge.go: the judge: answer, caller error, cut, missing data, a range
//     too large (with the span a remote named), venn's own limit, fault.
//   - attempt.go: one call's retry state and what it does with each
//     judged reply.
//   - The strategies: single.go (failover, one remote at a time), hedge.go
//     (hedged: a slow send raced against others, under a budget), vote.go
//     and consensus.go (voted: what votes, the ballots, who disagreed;
//     the rules, canonical forms and tally are remotes/consensus's),
//     getlogs.go (split eth_getLogs: which calls, how wide; the split
//     itself, by range and within one block by address, is the leaf
//     remotes/getlogs), broadcast.go (raw
//     transactions to several remotes), filters.go (pinned: a filter's
//     calls go to the remote that made it, which the leaf remotes/pin
//     remembers).
//   - Beside the calls: dedup.go (identical concurrent reads share one),
//     integrity.go and integrity_client.go (answers checked locally, liars
//     charged; which checks a call gets, which answer is served, who lied
//     and what the chain skips for a while are the leaf remotes/verified),
//     misbehave.go (cordons for misbehaviour; its record, log
//     file and strike window are remotes/misbehave's), distrust.go
//     (a remote found on another chain or misbehaving, and its last good
//     check, told to whoever keeps its answers: the cache drops them).
//   - Heads, the chain's head tracking, which the pool owns and hands out
//     (Pool.Heads): chainhead.go (the remotes handed to the leaf's
//     judge as heads.Member, and what its judgement is acted on),
//     blocktime.go (its block time and the leader's poll plan),
//     tipchain.go (recent canonical hashes, when a head was last heard),
//     feed.go (heads taken from the cluster leader's feed instead of
//     tracked here), chaincheck.go (what a remote's chain id check found
//     acted on, its answers dropped when on another chain;
//     CheckTipChain, ConfirmHash). What needs no remote (reports,
//     plausibility, the judge of each remote's reports and the chain's
//     corroborated tip, the block clock, the poll plan, the stall watch,
//     the newHeads subscription) is the leaf remotes/heads.
//   - One remote: remote.go (Remote, its limits and outcomes; its breaker
//     is the leaf remotes/breaker, its latency quantiles remotes/score),
//     health.go (its trackers: chain id and head polls, newHeads; when
//     its chain id is asked again, and what an answer means, is the leaf
//     remotes/health), avail.go and avail_probe.go (the oldest block it
//     serves of each kind of data: stated, probed, learnt from answers,
//     shared through an AvailShare; the windows, the probe's search and
//     whether it is wanted are the leaf remotes/avail).
//   - Beside the pool, behind small interfaces they declare:
//     remotes/relay (clients' subscriptions relayed upstream: a
//     remote's eth_subscribe, or a polled pending-transaction filter;
//     relays.go hands it the pool's members, selection and clock as
//     relay.Pool, and each remote's call and subscribe as
//     relay.Upstream; Pool.Relays) and remotes/side (shadows and
//     transaction groups: side.go splits them out of the chain's remotes,
//     checks their settings and builds the side.Side that Pool.call goes
//     through when there is one).
//   - Below it, leaves that know no Pool or Remote: remotes/wire
//     (transports, replies under the reply budget, redaction, upstream
//     subscriptions and their errors), remotes/verdict (what an upstream
//     error means: its class, reason and span), remotes/heads (head
//     tracking's computations), remotes/health (a remote's chain id
//     check: its state, when it is due, what an answer means),
//     remotes/budget (weights, budgets and their
//     meters), remotes/consensus (vote rules, canonical answers, the
//     tally), remotes/misbehave (the misbehaviour record), remotes/verified
//     (a verified call's checks, the answer served, its liars), remotes/avail
//     (windows of old data and the probe's search), remotes/breaker (a
//     remote's circuit breaker), remotes/hedge (a hedge's delay and the
//     hedge budget), remotes/score (what a remote's score is
//     made of: latency quantiles, misbehaviour level, weights and the
//     scoring section, and a tier's ranking into a preferred set) and remotes/getlogs
//     (the eth_getLogs split, its parts sent through a Sender the pool
//     implements), remotes/fielderr (config problems, each naming its
//     field, for the checks here and the leaves'); status.go fills remotes/status, the report of each
//     remote (Pool.Status) and of why none served a call. Beside
//     them, remotes/redisstore, the Redis adapter (budget counters and
//     availability probes shared by a cluster's replicas): remotes links
//     no Redis client. errors.go holds the pool's own answers to a call
//     no remote served, each with its JSON-RPC code for jrpc.ToWire.
//   - pool_config.go (a chain's pool, its consensus rules) and
//     hedge_config.go (hedging): the YAML schema with defaults and
//     checks; a remote's own is the leaf remotes/settings (config.go
//     names its Config and Tier here); metrics.go, module.go: Prometheus
//     series, fx.
package remotes

// Package headstore owns a chain's near-head window: the last N blocks with
// their receipts, a transaction index and the logs, plus head, safe and
// finalized numbers. The leader's stalker publishes changes to a Store
// (headstore/redisstore for a cluster, Memory for one process); every
// replica follows the store into its own in-memory Window and answers head
// requests from it.
//
// It must not call remotes: when the window cannot answer, it says so and
// the router forwards the call. It must not link go-redis: Redis is its
// redisstore subpackage's.
package headstore

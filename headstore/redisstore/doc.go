// Package redisstore is the headstore.Store of a cluster: a chain's head
// window in Redis, shared by every replica. It owns the encoding of events
// and block bodies in Redis and the reading of the event stream; the key
// names and scripts are package keyspace's.
//
// It is the only part of the head window that links go-redis: the window,
// the follower and the subscriptions above them know only headstore.Store.
// It must not judge blocks or call remotes: the leader's stalker decides
// what to publish.
package redisstore

// Package redisstore is the subcenter's Redis adapter: the polled filters
// (subcenter.FilterStore) and the pending-transaction feed
// (subcenter.PendingFeed) a cluster's replicas share, under keyspace's
// keys and scripts. A poll's advance is a compare-and-set in a script, so
// two replicas polling one filter never deliver the same changes twice.
//
// It is the only part of the subcenter that links go-redis. It owns how a
// filter and the feed are stored, nothing else: it must not match logs,
// deliver changes or read the head window.
package redisstore

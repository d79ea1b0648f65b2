// Package admin is venn's operator API: a JSON API over HTTP, on its own
// listener or on the metrics one, that reads the state of this replica
// and its cluster (chains, remotes and why each is in rotation or not,
// replicas, the effective config with its secrets redacted) and acts on
// it (manual cordons shared by every replica, drain, reload). Every
// action needs a bearer token, is logged with the token's name and
// counted (venn_admin_actions_total).
//
// It owns the manual cordons' storage and their propagation (cordons.go:
// Redis, or memory without it), the replicas' heartbeats and presence keys (redis.go) and
// the config's redaction (redact.go). It does not own what it reads or
// acts on: the app hands it each chain's pool and state (Chain), and the
// drain and reload as functions. The Redis keys it uses are named by
// keyspace.
package admin

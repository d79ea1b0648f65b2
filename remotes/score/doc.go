// Package score is what a remote's routing score is made of without the
// remote: its recent latency quantiles (Latency, a decaying log-linear
// histogram recorded on every call without a lock).
//
// It knows no Pool or Remote and picks no remote: remotes records each
// call's latency, reads the quantiles for a remote's score (score.go) and
// a hedge's delay (hedge.go), and routes by the scores.
package score

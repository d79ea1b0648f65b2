// Package score is what a remote's routing score is made of without the
// remote: its recent latency quantiles (Latency, a decaying log-linear
// histogram recorded on every call without a lock), its misbehaviour
// level (Level, halving every half-life), the weights and the chain's
// scoring section (Config: weights, margin, interval, probe share, with
// defaults and checks), and the ranking of a tier into scores and a
// preferred set with hysteresis (Rank).
//
// It knows no Pool or Remote and picks no remote: remotes records each
// call's latency, reads the terms of each remote, ranks each tier every
// interval (score.go), reads a quantile for a hedge's delay (hedge.go) and
// routes by the preferred sets (select.go).
package score

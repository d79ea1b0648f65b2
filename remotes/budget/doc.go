// Package budget is a remote's share of its tier: its weight, and its
// budget, what it may be sent in a billing period, counted in calls or in
// the compute units a provider bills per method. config.go holds the YAML
// schema (Config, Period, the cost table, weights) and its checks;
// meter.go the counts at run time (Meter: billed on the hot path, the
// share a nearly spent budget leaves, flushed to a Store every
// FlushInterval).
//
// It owns the accounting and nothing else: it picks no remote, sends no
// call and speaks to no Redis (remotes/redisstore implements Store). The
// pool bills each call it sends, reads Share and Over when it selects, and
// runs Run to flush its members' meters.
package budget

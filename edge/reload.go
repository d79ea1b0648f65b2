package edge

// Reconfigured returns the Edge of c, which Validate has passed, for a
// configuration reload: it shares e's metrics, logger and rate-limit
// store, so series continue and, in memory, the buckets of keys and
// addresses keep what they counted. It does no I/O; e is unchanged and
// keeps serving whoever holds it.
func (e *Edge) Reconfigured(c Config) *Edge {
	store := e.store
	if store == nil {
		if mem, ok := e.limiter.(*MemoryLimiter); ok {
			store = mem
		}
	}
	return compile(c, compileDeps{store: store, jwks: e.jwks, clock: e.clock, budgets: e.budgets, usage: e.usage}, e.log, e.metrics)
}

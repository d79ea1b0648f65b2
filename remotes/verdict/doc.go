// Package verdict says what a failed upstream call means: Classify reads
// the error a transport returned (a node's JSON-RPC error, an HTTP status,
// a bad reply, a network fault) and gives its Verdict, a Class (the
// caller's, retry, throttled, too large), a Reason from a fixed set, whether
// it is the remote's fault, and the block span or oldest block the text
// names. classify.go holds Classify and the order of its steps, rules.go
// the table of provider texts, verdict.go the verdicts, span.go the spans.
//
// It is a leaf: it judges one error, with no remote, pool, clock or
// configuration, so the balancer, the forger and the cache's adapters
// share one reading of upstream errors. It must not act on a verdict
// (failover, breakers, backoff are the balancer's) nor reach the network.
package verdict

package keyspace

// BudgetKey is the counter of a remote's budget for one period (package
// remotes): an integer, INCRBY'd by every replica's flushes, expiring an
// hour after its period ends. It shares its chain's hash tag, so one
// pipeline flushes a chain's remotes in one Cluster slot:
//
//	venn:{CHAIN}:budget:REMOTE:PERIOD  PERIOD is h2026120123, d20261201 or m202612
func BudgetKey(chain, remote, period string) string {
	return "venn:{" + chain + "}:budget:" + remote + ":" + period
}

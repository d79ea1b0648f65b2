package keyspace

// CreditsKey is the count of the credits a tenant spent in one period
// (package edge, tenants' budgets): an integer, INCRBY'd by every
// replica's flushes, expiring after its period ends. Each tenant is its
// own hash tag, so one pipeline's commands for a tenant stay in one
// Cluster slot:
//
//	venn:credits:{tenant:NAME}:PERIOD  PERIOD is m + a unix minute, or M + yyyymm
func CreditsKey(tenant, period string) string {
	return "venn:credits:{tenant:" + tenant + "}:" + period
}

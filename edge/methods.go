package edge

import "strings"

// DefaultBlockedMethods returns the namespaces venn refuses unless enabled:
// they administer or unlock the node behind venn (admin_, personal_,
// miner_, clique_ votes, the consensus client's engine_) or reach into its
// internals (debug_, which includes debug_setHead and profiling next to the
// traces). A blocked method is answered as geth answers one it does not
// expose, without an upstream call.
func DefaultBlockedMethods() []string {
	return []string{"admin_", "clique_", "debug_", "engine_", "miner_", "personal_"}
}

// defaultBlocked is DefaultBlockedMethods as a switch: every call passes
// through it.
func defaultBlocked(method string) bool {
	i := strings.IndexByte(method, '_')
	if i < 0 {
		return false
	}
	switch method[:i+1] {
	case "admin_", "clique_", "debug_", "engine_", "miner_", "personal_":
		return true
	}
	return false
}

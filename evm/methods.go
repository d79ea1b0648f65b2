package evm

import "strings"

// MatchMethod reports whether method is on list: exactly, or under an entry
// ending in "_" or "*" taken as a prefix ("debug_", "eth_get*"). Every
// method list in venn's config reads this way.
func MatchMethod(list []string, method string) bool {
	for _, p := range list {
		switch {
		case p == method:
			return true
		case strings.HasSuffix(p, "*") && strings.HasPrefix(method, p[:len(p)-1]):
			return true
		case strings.HasSuffix(p, "_") && strings.HasPrefix(method, p):
			return true
		}
	}
	return false
}

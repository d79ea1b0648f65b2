package edge

import "github.com/venn-gateway/venn/evm"

// checkScoped says whether a caller held to scopes may call method, and if
// not why: methods.block first, then the blocklist (which the methods
// section or any of the caller's scopes may enable), then each scope's
// own block and allow lists.
func (p *MethodPolicy) checkScoped(method string, scopes []*scope) (authReason, bool) {
	if len(p.Block) > 0 && evm.MatchMethod(p.Block, method) {
		return authBlocked, false
	}
	if defaultBlocked(method) && !evm.MatchMethod(p.Enable, method) && !enabledBy(scopes, method) {
		return authBlocked, false
	}
	for _, s := range scopes {
		if r, ok := s.checkMethod(method); !ok {
			return r, false
		}
	}
	return 0, true
}

func enabledBy(scopes []*scope, method string) bool {
	for _, s := range scopes {
		if len(s.enable) > 0 && evm.MatchMethod(s.enable, method) {
			return true
		}
	}
	return false
}

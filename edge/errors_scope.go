package edge

import "github.com/venn-gateway/venn/jrpc"

// Wire errors of scopes and tokens. Each names what is not allowed and
// whose scope refused it (a tenant by name, a key never).

func errToken(r tokenReason) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: " + r.message()}
}

func errScopeChain(s *scope, chain string) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: " + s.whose() + " may not use chain " + chain}
}

func errScopeAddr(s *scope) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: " + s.whose() +
		" may not call from this client address (cidrs)"}
}

func errScopeOrigin(s *scope) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: origin not allowed for " + s.whose() + " (cors)"}
}

func errContract(addr string, s *scope) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: contract " + clipAddr(addr) +
		" is not allowed for " + s.whose() + " (contracts)"}
}

func errNoContract(method string, s *scope) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: " + method +
		" must name a contract " + s.whose() + " may use (contracts)"}
}

func clipAddr(a string) string {
	if len(a) > 42 {
		return a[:42] + "..."
	}
	return a
}

// errUnauthorizedJWT answers a request with neither a key nor a token.
func errUnauthorizedJWT(keys bool, keyHeader string) *jrpc.Error {
	msg := "unauthorized: a bearer token is required (Authorization: Bearer <jwt>)"
	if keys {
		msg = "unauthorized: an API key (in the " + keyHeader + " header or the path, /CHAIN/KEY) or a bearer token (Authorization: Bearer <jwt>) is required"
	}
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: msg}
}

package edge

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// A scope is what one key, tenant or token may call. A caller is held to
// every scope it has (its key's, its tenant's, its token's narrowing of
// the tenant's): each must allow a call.
type scope struct {
	kind   scopeKind
	name   string          // the tenant's; "" for a key (whose name no refusal says) or a token
	chains map[string]bool // nil: all
	allow  []string        // nil: all
	block  []string
	enable []string
	// contracts are the addresses calls may name; nil: any.
	contracts map[[20]byte]struct{}
	cidrs     []netip.Prefix // nil: any address
	origins   *cors          // nil: the cors section's
	rate      Rate
	bucket    string // its rate-limit bucket
}

// scopeKind says whose a scope is, in refusals.
type scopeKind uint8

const (
	scopeOfKey scopeKind = iota
	scopeTenant
	scopeToken
)

// whose names the scope's holder in a refusal: never a key.
func (s *scope) whose() string {
	switch s.kind {
	case scopeTenant:
		return "tenant " + s.name
	case scopeToken:
		return "this token"
	}
	return "this API key"
}

func (s *scope) setChains(list []string) {
	if len(list) == 0 {
		return
	}
	s.chains = make(map[string]bool, len(list))
	for _, ch := range list {
		s.chains[ch] = true
	}
}

func (s *scope) setContracts(list []string) error {
	if len(list) == 0 {
		return nil
	}
	s.contracts = make(map[[20]byte]struct{}, len(list))
	for _, a := range list {
		b, ok := parseAddress(a)
		if !ok {
			return errBadAddress
		}
		s.contracts[b] = struct{}{}
	}
	return nil
}

func (s *scope) setOrigins(list []string, keyHeader string) {
	if len(list) > 0 {
		s.origins = newCORS(CORS{AllowedOrigins: list}, keyHeader)
	}
}

// checkMethod says whether the scope lets method through, and if not why.
func (s *scope) checkMethod(method string) (authReason, bool) {
	if len(s.block) > 0 && evm.MatchMethod(s.block, method) {
		return authBlocked, false
	}
	if s.allow != nil && !evm.MatchMethod(s.allow, method) {
		return authMethod, false
	}
	return 0, true
}

// contractMethods are the calls a scope's contracts restrict, and where
// each names its addresses.
func contractParam(method string) (which contractArg, ok bool) {
	switch method {
	case "eth_call", "eth_estimateGas", "eth_createAccessList", "debug_traceCall":
		return argTo, true
	case "eth_getLogs", "eth_newFilter":
		return argAddress, true
	case "eth_subscribe":
		return argSubscribeLogs, true
	}
	return 0, false
}

type contractArg uint8

const (
	argTo            contractArg = iota // params[0].to
	argAddress                          // params[0].address: one or a list
	argSubscribeLogs                    // params[1].address when params[0] is "logs"
)

// checkContracts says whether the scope lets a call of method with params
// through; nil when it does, else the refusal, which names the address (or
// says none was named).
func (s *scope) checkContracts(method string, params json.RawMessage) *jrpc.Error {
	if s.contracts == nil {
		return nil
	}
	which, ok := contractParam(method)
	if !ok {
		return nil
	}
	var args []json.RawMessage
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return nil // the node refuses malformed params; nothing is read
	}
	obj := args[0]
	if which == argSubscribeLogs {
		var kind string
		if json.Unmarshal(args[0], &kind) != nil || kind != "logs" {
			return nil
		}
		if len(args) < 2 {
			return errNoContract(method, s)
		}
		obj = args[1]
	}
	var fields struct {
		To      *string         `json:"to"`
		Address json.RawMessage `json:"address"`
	}
	if err := json.Unmarshal(obj, &fields); err != nil {
		return nil
	}
	var addrs []string
	switch which {
	case argTo:
		if fields.To != nil {
			addrs = []string{*fields.To}
		}
	default:
		a := bytes.TrimSpace(fields.Address)
		switch {
		case len(a) == 0 || bytes.Equal(a, []byte("null")):
		case a[0] == '[':
			_ = json.Unmarshal(a, &addrs)
		default:
			var one string
			if json.Unmarshal(a, &one) == nil {
				addrs = []string{one}
			}
		}
	}
	if len(addrs) == 0 {
		return errNoContract(method, s)
	}
	for _, a := range addrs {
		b, ok := parseAddress(a)
		if !ok {
			return nil // the node refuses it
		}
		if _, ok := s.contracts[b]; !ok {
			return errContract(a, s)
		}
	}
	return nil
}

// parseAddress reads a 0x-prefixed 20-byte hex address, either case.
func parseAddress(s string) ([20]byte, bool) {
	var a [20]byte
	h, ok := strings.CutPrefix(strings.TrimSpace(s), "0x")
	if !ok {
		h, ok = strings.CutPrefix(s, "0X")
	}
	if !ok || len(h) != 40 {
		return a, false
	}
	if _, err := hex.Decode(a[:], []byte(h)); err != nil {
		return a, false
	}
	return a, true
}

var errBadAddress = errors.New("not a 20-byte hex address")

// allowList is a key's or tenant's methods as a scope holds them: nil
// (all) when empty, as `methods: []` and a stored entry's empty list
// mean, never "none".
func allowList(m []string) []string {
	if len(m) == 0 {
		return nil
	}
	return m
}

package edge

import (
	"fmt"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
)

// Tenant is one team or customer of a shared venn: what its keys and
// tokens may call, how often, and how many credits it may spend. Keys
// (auth.keys[].tenant) and JWTs (auth.jwt.tenant_claim) name it; every
// replica applies the same tenants, from the same file.
type Tenant struct {
	// Name stands for the tenant in refusals, logs, metrics, usage and
	// Redis keys.
	Name string `yaml:"name"`
	// Chains the tenant may use; empty: all.
	Chains []string `yaml:"chains"`
	// Methods the tenant may call; empty: any the blocklist lets through.
	// Entries ending in "_" or "*" are prefixes.
	Methods []string `yaml:"methods"`
	// Block refuses these methods to the tenant; Enable lets it call these
	// otherwise blocked ones (methods.block still wins).
	Block  []string `yaml:"block"`
	Enable []string `yaml:"enable"`
	// Contracts, when set, are the only addresses the tenant's eth_call,
	// eth_estimateGas, eth_createAccessList, eth_getLogs, eth_newFilter
	// and eth_subscribe logs may name; a call naming none (a log filter
	// without an address, a call without to) is refused too.
	Contracts []string `yaml:"contracts"`
	// CIDRs, when set, are the only client addresses the tenant's calls
	// may come from.
	CIDRs []string `yaml:"cidrs"`
	// CORS, when set, are the only browser origins the tenant's calls may
	// come from (the cors section's syntax); empty: the cors section's.
	CORS []string `yaml:"cors"`
	// RateLimit limits the tenant's calls across every key, token, chain
	// and replica.
	RateLimit Rate `yaml:"rate_limit"`
	// Credits are the tenant's budgets (credits.go).
	Credits Budget `yaml:"credits"`
}

// tenant is a Tenant ready to check.
type tenant struct {
	scope
	name     string
	budget   Budget
	account  *account // its budgets' counts; nil unless budget.Limited()
	meter    meterSlots
	credits  prometheus.Counter          // nil without metrics
	rejected map[bool]prometheus.Counter // by "the month's budget"
}

func (c Config) hasTenant(name string) bool {
	for _, t := range c.Tenants {
		if t.Name == name {
			return true
		}
	}
	return false
}

func (c Config) validateTenants(p *problems, chains map[string]bool) {
	names := make(map[string]int, len(c.Tenants))
	for i, t := range c.Tenants {
		path := fmt.Sprintf("tenants[%d]", i)
		switch first, dup := names[t.Name]; {
		case !keyNameRE.MatchString(t.Name):
			p.add(path+".name", "must match [A-Za-z0-9_.-]+, not %q", t.Name)
		case dup:
			p.add(path+".name", "%q is already used by tenants[%d]", t.Name, first)
		default:
			names[t.Name] = i
		}
		for j, ch := range t.Chains {
			if !chains[ch] {
				p.add(fmt.Sprintf("%s.chains[%d]", path, j), "%q is not a configured chain", ch)
			}
		}
		checkMethodList(p, path+".methods", t.Methods)
		checkMethodList(p, path+".block", t.Block)
		checkMethodList(p, path+".enable", t.Enable)
		checkContracts(p, path+".contracts", t.Contracts)
		checkCIDRs(p, path+".cidrs", t.CIDRs)
		checkOrigins(p, path+".cors", t.CORS)
		t.RateLimit.validate(p, path+".rate_limit")
		t.Credits.validate(p, path+".credits")
	}
}

func checkContracts(p *problems, path string, list []string) {
	for i, a := range list {
		if _, ok := parseAddress(a); !ok {
			p.add(fmt.Sprintf("%s[%d]", path, i), "must be a 0x-prefixed 20-byte hex address, not %q", a)
		}
	}
}

func checkCIDRs(p *problems, path string, list []string) {
	for i, s := range list {
		if _, err := parsePrefix(s); err != nil {
			p.add(fmt.Sprintf("%s[%d]", path, i), "must be an address or a CIDR (10.0.0.0/8), not %q", s)
		}
	}
}

// compileTenants indexes c's tenants by name.
func (e *Edge) compileTenants(c Config) {
	for _, t := range c.Tenants {
		tn := &tenant{name: t.Name, budget: t.Credits}
		tn.meter.account = t.Name
		if m := e.creditMetrics; m != nil {
			tn.credits = m.credits.WithLabelValues(t.Name)
			tn.rejected = map[bool]prometheus.Counter{
				false: m.rejected.WithLabelValues(t.Name, "minute"),
				true:  m.rejected.WithLabelValues(t.Name, "month"),
			}
		}
		if t.Credits.Limited() {
			tn.account = e.budgets.track(t.Name, t.Credits)
		}
		tn.scope = scope{kind: scopeTenant, name: t.Name, allow: allowList(t.Methods), block: t.Block, enable: t.Enable,
			rate: t.RateLimit, bucket: "tenant:" + t.Name}
		tn.setChains(t.Chains)
		_ = tn.setContracts(t.Contracts) // Validate reported bad ones
		tn.setCIDRs(t.CIDRs)
		tn.setOrigins(t.CORS, e.keyHeader)
		if e.tenants == nil {
			e.tenants = make(map[string]*tenant, len(c.Tenants))
		}
		e.tenants[t.Name] = tn
	}
}

// setCIDRs parses the ranges Validate passed.
func (s *scope) setCIDRs(list []string) {
	for _, c := range list {
		if p, err := parsePrefix(c); err == nil {
			s.cidrs = append(s.cidrs, p)
		}
	}
}

// allowsAddr reports whether a client at ip may use the scope.
func (s *scope) allowsAddr(ip netip.Addr) bool {
	if s.cidrs == nil {
		return true
	}
	ip = ip.Unmap()
	for _, p := range s.cidrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// scopesNeedIP reports whether a key or tenant is limited to address
// ranges: then every request's client address is worked out.
func scopesNeedIP(c Config) bool {
	for _, k := range c.Auth.Keys {
		if len(k.CIDRs) > 0 {
			return true
		}
	}
	for _, t := range c.Tenants {
		if len(t.CIDRs) > 0 {
			return true
		}
	}
	return false
}

// scopedOrigins are the origins keys and tenants allow, which preflights
// (carrying no key) must be answered for.
func scopedOrigins(c Config) []string {
	var out []string
	for _, k := range c.Auth.Keys {
		out = append(out, k.CORS...)
	}
	for _, t := range c.Tenants {
		out = append(out, t.CORS...)
	}
	return out
}

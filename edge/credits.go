package edge

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// CreditsConfig is the credits section: what each call costs, in credits,
// against the tenants' budgets (tenants[].credits). A method's cost comes
// from the preset's table, overridden by methods; a call answered from the
// head window or the cache is priced by served_from (cheaper by default:
// it cost venn no upstream call).
type CreditsConfig struct {
	// Preset is the base table: venn (the default), or a provider's
	// published compute-unit table, alchemy or infura, for operators who
	// resell one.
	Preset string `yaml:"preset"`
	// Default is the cost of a method no table names (default: the
	// preset's).
	Default int64 `yaml:"default"`
	// Methods override the preset's costs; entries ending in "_" or "*"
	// are prefixes ("debug_*": 100), exact names win over prefixes.
	Methods map[string]int64 `yaml:"methods"`
	// ServedFrom multiplies the cost of calls answered by a part of venn
	// other than the remotes: head (the head window), cache, history,
	// forger, local. Default head 0.5 and cache 0.5, the rest 1.
	ServedFrom map[string]float64 `yaml:"served_from"`
	// FlushInterval is how often a replica adds what its tenants spent to
	// the cluster's count in Redis and reads the others' (default 1s): a
	// budget can be overspent by what the replicas serve in one interval.
	FlushInterval time.Duration `yaml:"flush_interval"`
}

// Defaults of the credits section.
const (
	DefaultCreditsPreset    = "venn"
	DefaultCreditsFlush     = time.Second
	defaultHeadFactor       = 0.5
	defaultCacheFactor      = 0.5
	creditsHeader           = "X-Venn-Credits"
	maxCreditsFlushInterval = time.Minute
	creditSources           = "head, history, cache, forger, remotes, local"
	creditsPresetNames      = "venn, alchemy, infura"
)

// costPresets are the base tables. venn's weighs what a call makes a node
// do, 10 for a plain read; the providers' are their published compute-unit
// (Alchemy) and credit (Infura) tables for the common methods: check them
// against your plan, and override what differs.
var costPresets = map[string]costTable{
	"venn": {def: 10, methods: map[string]int64{
		"eth_chainId": 1, "net_version": 1, "web3_clientVersion": 1, "eth_syncing": 1, "net_listening": 1,
		"eth_blockNumber": 5, "eth_gasPrice": 5, "eth_maxPriorityFeePerGas": 5, "eth_feeHistory": 10, "eth_blobBaseFee": 5,
		"eth_getBalance": 10, "eth_getCode": 10, "eth_getStorageAt": 10, "eth_getTransactionCount": 10,
		"eth_getBlockByNumber": 15, "eth_getBlockByHash": 15, "eth_getTransactionByHash": 10,
		"eth_getTransactionReceipt": 15, "eth_getBlockTransactionCountByNumber": 10,
		"eth_call": 20, "eth_estimateGas": 40, "eth_createAccessList": 40, "eth_getProof": 40,
		"eth_getLogs": 60, "eth_getBlockReceipts": 100, "eth_newFilter": 20, "eth_newBlockFilter": 10,
		"eth_getFilterChanges": 10, "eth_getFilterLogs": 60, "eth_uninstallFilter": 5,
		"eth_subscribe": 10, "eth_unsubscribe": 5,
		"eth_sendRawTransaction": 100, "eth_sendBundle": 100,
		"debug_*": 200, "trace_*": 200,
	}},
	// Alchemy's compute units per method, as published.
	"alchemy": {def: 26, methods: map[string]int64{
		"eth_chainId": 0, "net_version": 0, "web3_clientVersion": 0, "eth_syncing": 0, "net_listening": 0,
		"eth_blockNumber": 10, "eth_gasPrice": 20, "eth_maxPriorityFeePerGas": 10, "eth_feeHistory": 10,
		"eth_getBalance": 20, "eth_getCode": 20, "eth_getStorageAt": 20, "eth_getTransactionCount": 20,
		"eth_getBlockByNumber": 20, "eth_getBlockByHash": 20, "eth_getTransactionByHash": 20,
		"eth_getTransactionReceipt": 20, "eth_getBlockTransactionCountByNumber": 20,
		"eth_call": 26, "eth_estimateGas": 20, "eth_createAccessList": 20, "eth_getProof": 20,
		"eth_getLogs": 60, "eth_getBlockReceipts": 500, "eth_newFilter": 20, "eth_newBlockFilter": 20,
		"eth_getFilterChanges": 20, "eth_getFilterLogs": 75, "eth_uninstallFilter": 10,
		"eth_subscribe": 10, "eth_unsubscribe": 10,
		"eth_sendRawTransaction": 40,
		"debug_*":                170, "trace_*": 75,
	}},
	// Infura's credits per method, as published.
	"infura": {def: 80, methods: map[string]int64{
		"eth_chainId": 5, "net_version": 5, "web3_clientVersion": 5, "eth_syncing": 5, "net_listening": 5,
		"eth_blockNumber": 80, "eth_gasPrice": 80, "eth_feeHistory": 80,
		"eth_getLogs": 255, "eth_getBlockReceipts": 1000, "eth_estimateGas": 300, "eth_createAccessList": 80,
		"eth_sendRawTransaction": 720, "eth_subscribe": 5, "eth_unsubscribe": 10,
		"debug_*": 1000, "trace_*": 300,
	}},
}

// costTable is a preset with its overrides applied.
type costTable struct {
	def      int64
	methods  map[string]int64 // exact names
	prefixes []costPrefix     // longest first
}

type costPrefix struct {
	prefix string
	cost   int64
}

// pricing prices calls. It is compiled once per configuration.
type pricing struct {
	table   costTable
	factors [numSources]float64 // by sourceIndex of a Note's source
}

// The sources served_from may name (creditSources), as indexes.
const (
	sourceHead = iota
	sourceHistory
	sourceCache
	sourceForger
	sourceRemotes
	sourceLocal
	numSources
)

// sourceIndex indexes pricing.factors with a Note's source: a switch, not
// a map, since every call is priced.
func sourceIndex(source string) (int, bool) {
	switch source {
	case "head":
		return sourceHead, true
	case "history":
		return sourceHistory, true
	case "cache":
		return sourceCache, true
	case "forger":
		return sourceForger, true
	case "remotes":
		return sourceRemotes, true
	case "local":
		return sourceLocal, true
	}
	return 0, false
}

func newPricing(c CreditsConfig) *pricing {
	preset := costPresets[c.Preset]
	t := costTable{def: preset.def, methods: make(map[string]int64)}
	if c.Default > 0 {
		t.def = c.Default
	}
	add := func(m map[string]int64) {
		for name, cost := range m {
			if p, ok := strings.CutSuffix(name, "*"); ok || strings.HasSuffix(name, "_") {
				t.prefixes = slices.DeleteFunc(t.prefixes, func(x costPrefix) bool { return x.prefix == p })
				t.prefixes = append(t.prefixes, costPrefix{prefix: p, cost: cost})
				continue
			}
			t.methods[name] = cost
		}
	}
	add(preset.methods)
	add(c.Methods)
	slices.SortFunc(t.prefixes, func(a, b costPrefix) int { return len(b.prefix) - len(a.prefix) })
	p := &pricing{table: t}
	for i := range p.factors {
		p.factors[i] = 1
	}
	p.factors[sourceHead], p.factors[sourceCache] = defaultHeadFactor, defaultCacheFactor
	for k, v := range c.ServedFrom {
		if i, ok := sourceIndex(k); ok { // Validate reported the rest
			p.factors[i] = v
		}
	}
	return p
}

// cost is what a call of method answered by source costs.
func (p *pricing) cost(method, source string) int64 {
	base, _ := p.price(method)
	i, ok := sourceIndex(source)
	if !ok {
		return base
	}
	return p.factored(base, i)
}

// price is what a call of method costs before served_from, and label's
// bound name for it, with one lookup of method.
func (p *pricing) price(method string) (int64, string) {
	if base, ok := p.table.methods[method]; ok {
		return base, method
	}
	base := p.table.def
	for _, pre := range p.table.prefixes {
		if strings.HasPrefix(method, pre.prefix) {
			base = pre.cost
			break
		}
	}
	return base, evm.MethodLabel(method)
}

// factored is base for a call answered by the source of index i.
func (p *pricing) factored(base int64, i int) int64 {
	if f := p.factors[i]; f != 1 {
		return int64(math.Ceil(float64(base) * f))
	}
	return base
}

// label bounds a client's method name for usage and metrics: a method the
// tables or venn know, or "other".
func (p *pricing) label(method string) string {
	if _, ok := p.table.methods[method]; ok {
		return method
	}
	return evm.MethodLabel(method)
}

func (c CreditsConfig) withDefaults() CreditsConfig {
	if c.Preset == "" {
		c.Preset = DefaultCreditsPreset
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultCreditsFlush
	}
	return c
}

func (c CreditsConfig) validate(p *problems) {
	if _, ok := costPresets[c.Preset]; !ok {
		p.add("credits.preset", "must be one of %s, not %q", creditsPresetNames, c.Preset)
	}
	if c.Default < 0 {
		p.add("credits.default", "must be >= 0")
	}
	for m, v := range c.Methods {
		if v < 0 {
			p.add(fmt.Sprintf("credits.methods[%s]", m), "must be >= 0")
		}
	}
	for s, f := range c.ServedFrom {
		if !slices.Contains(strings.Split(creditSources, ", "), s) {
			p.add("credits.served_from."+s, "must be one of %s", creditSources)
		}
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			p.add("credits.served_from."+s, "must be a finite number >= 0")
		}
	}
	if c.FlushInterval < 0 || c.FlushInterval > maxCreditsFlushInterval {
		p.add("credits.flush_interval", "must be between 0 and %s", maxCreditsFlushInterval)
	}
}

package cache

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults(2*time.Second, true)
	if !c.On() || !*c.Redis || c.Postgres || c.MemoryBytes != DefaultMemoryBytes || c.RecentTTL != 8*time.Second ||
		!*c.CacheReverts.Settled || *c.CacheReverts.Recent || c.MaxEntryBytes != DefaultMaxEntryBytes ||
		c.PostgresMaxRows != DefaultPostgresMaxRows || c.TierTimeout != DefaultTierTimeout || c.Verify != VerifyNone {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c := (Config{}).WithDefaults(100*time.Millisecond, false); *c.Redis || c.RecentTTL != minRecentTTL {
		t.Fatalf("without redis, short blocks: %+v", c)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	tests := []struct {
		give func(*Config)
		want string
	}{
		{func(c *Config) { c.MemoryBytes = 10 }, "memory_bytes:"},
		{func(c *Config) { c.MaxEntryBytes = -1 }, "max_entry_bytes:"},
		{func(c *Config) { c.RecentTTL = -time.Second }, "recent_ttl:"},
		{func(c *Config) { c.RecentTTL = 48 * time.Hour }, "recent_ttl: must not exceed settled_ttl"},
		{func(c *Config) { c.Methods.Add = []string{"eth_gasPrice"} }, "methods.add[0]: eth_gasPrice has no block parameter"},
		{func(c *Config) { c.Methods.Add = []string{"eth_call", "eth_sendRawTransaction"} }, "methods.add[1]:"},
		{func(c *Config) { c.Methods.Never = []string{"*"} }, "methods.never[0]:"},
		{func(c *Config) { c.PostgresMaxRows = -1 }, "postgres_max_rows: must be positive"},
		{func(c *Config) { c.TierTimeout = -time.Millisecond }, "tier_timeout: must be positive"},
		{func(c *Config) { c.Verify = "proof" }, `verify: must be "none" or "proofs"`},
	}
	for _, tt := range tests {
		c := Config{}.WithDefaults(time.Second, false)
		tt.give(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", c, err, tt.want)
		}
	}
}

func TestPolicyMethods(t *testing.T) {
	c := Config{Methods: Methods{Add: []string{"eth_estimateGas", "debug_traceCall"}, Remove: []string{"debug_", "eth_getProof"},
		Never: []string{"eth_estimateGas"}}}.WithDefaults(time.Second, false)
	p := newPolicy(c, nil)
	for m, want := range map[string]bool{"eth_call": true, "eth_getProof": false, "debug_traceBlockByNumber": false,
		"debug_traceCall": true, "eth_estimateGas": false, "trace_block": true} {
		if p.caches(m) != want {
			t.Errorf("%s: cached %v, want %v", m, !want, want)
		}
	}
}

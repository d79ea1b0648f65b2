package app

import (
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/cache"
)

func TestCacheConfig(t *testing.T) {
	cfg := mustParse(t, threeRemotes)
	cc := cfg.Chains[0].Cache
	if !cc.On() || *cc.Redis || cc.MemoryBytes != cache.DefaultMemoryBytes || cc.RecentTTL != 48*time.Second {
		t.Errorf("defaults without redis: %+v", cc)
	}
	cfg = mustParse(t, "redis: {url: \"redis://127.0.0.1:6379/0\"}\n"+threeRemotes+
		"    block_time: 2s\n    cache: {memory_bytes: 1048576, methods: {remove: [eth_call]}, verify: proofs}\n")
	cc = cfg.Chains[0].Cache
	if !*cc.Redis || cc.MemoryBytes != 1<<20 || cc.RecentTTL != 8*time.Second || cc.Methods.Remove[0] != "eth_call" ||
		cc.Verify != cache.VerifyProofs {
		t.Errorf("with redis and a section: %+v", cc)
	}
}

func TestCacheConfigNamesTheField(t *testing.T) {
	tests := []struct{ give, want string }{
		{"    cache: {memory_bytes: 100}\n", "chains[0].cache.memory_bytes: must be at least"},
		{"    cache: {methods: {add: [eth_gasPrice]}}\n", "chains[0].cache.methods.add[0]: eth_gasPrice has no block parameter"},
		{"    cache: {redis: true}\n", "chains[0].cache.redis: requires redis.url"},
		{"    cache: {postgres: true}\n", "chains[0].cache.postgres: requires postgres.url"},
		{"    cache: {recent_ttl: -1s}\n", "chains[0].cache.recent_ttl: must be positive"},
		{"    cache: {postgres_max_rows: -1}\n", "chains[0].cache.postgres_max_rows: must be positive"},
		{"    cache: {verify: proof}\n", `chains[0].cache.verify: must be "none" or "proofs"`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(threeRemotes + tt.give))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.give, err, tt.want)
		}
	}
}

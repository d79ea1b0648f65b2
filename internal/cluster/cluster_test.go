package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/keyspace"
)

// TestConfigYAML: what Config writes is what venn reads.
func TestConfigYAML(t *testing.T) {
	c := Config{Listen: "127.0.0.1:8545", MetricsListen: "127.0.0.1:9100", RedisAddr: "127.0.0.1:6390",
		ReplicaID: "r1", LeaseTTL: 5 * time.Second, Chain: "dev", ChainID: 1337, BlockTime: 150 * time.Millisecond, Window: 32,
		Remotes: []Remote{
			{Name: "n0", URL: "http://127.0.0.1:1/", WSURL: "ws://127.0.0.1:1/", Timeout: time.Second},
			{Name: "up", URL: "http://127.0.0.1:2/", MaxInFlight: 64},
		},
		Extra: "shutdown_timeout: 5s\n", ChainExtra: "history: {confirmations: 20}\nintegrity: {client_calls: true}\n"}
	got, err := app.Parse([]byte(c.YAML()))
	if err != nil {
		t.Fatalf("%v\n%s", err, c.YAML())
	}
	ch := got.Chains[0]
	switch {
	case got.Listen != c.Listen || got.MetricsListen == nil || *got.MetricsListen != c.MetricsListen:
		t.Errorf("listeners %q %v", got.Listen, got.MetricsListen)
	case got.Redis.ReplicaID != "r1" || got.Redis.LeaseTTL != c.LeaseTTL || ch.Name != "dev" || ch.ChainID != 1337 || ch.Pool.BlockTime != c.BlockTime:
		t.Errorf("redis %+v, chain %s %d %v", got.Redis, ch.Name, ch.ChainID, ch.Pool.BlockTime)
	case len(ch.Remotes) != 2 || ch.Remotes[0].WSURL != c.Remotes[0].WSURL || ch.Remotes[0].Timeout != time.Second ||
		ch.Remotes[1].MaxInFlight != 64:
		t.Errorf("remotes %+v", ch.Remotes)
	case ch.History.Confirmations != 20 || !ch.Integrity.ClientCalls:
		t.Errorf("chain extra: history %+v, integrity %+v", ch.History, ch.Integrity)
	}
}

// TestRedis: a private server answers, names the lease holder, and comes
// back empty after a kill.
func TestRedis(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if id, _, err := r.Leader(ctx, "dev"); err != nil || id != "" {
		t.Fatalf("no lease: %q, %v", id, err)
	}
	if err := r.Client.Set(ctx, keyspace.For("dev").Lease, "r1:7", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if id, epoch, err := r.Leader(ctx, "dev"); err != nil || id != "r1" || epoch != 7 {
		t.Fatalf("lease: %q %d, %v", id, epoch, err)
	}
	r.Kill()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if id, _, err := r.Leader(ctx, "dev"); err != nil || id != "" {
		t.Fatalf("after a restart: %q, %v", id, err)
	}
}

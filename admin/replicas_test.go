package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/stalker"
)

// TestReplicasGoneWhenTheirHeartbeatStops: a replica that stopped
// beating without cleanup (what kill -9 leaves in Redis: its last
// heartbeat, and the lease it held) is listed, leading, while its lease
// lives; once another replica holds the lease, only that one is shown
// leading, and the dead one leaves the list within its presence TTL
// instead of after minutes.
func TestReplicasGoneWhenTheirHeartbeatStops(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:*" + token + "*" })
	chain := "replicas-" + token
	live, dead := "live-"+token, "dead-"+token
	t.Cleanup(func() { rdb.HDel(context.Background(), keyspace.Replicas, live, dead) })
	ctx := context.Background()
	lease := keyspace.For(chain).Lease

	// The dead replica's last acts: heartbeats (below), and the lease of
	// the chain.
	const presence = 600 * time.Millisecond
	if err := rdb.Set(ctx, lease, dead+":1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, chain, live, nodes, rdb, &clock{now: time.Now()}, func(o *Options) {
		o.Chains[0].Leader = func(ctx context.Context) (stalker.Leader, bool, error) { return stalker.ReadLeader(ctx, rdb, chain) }
	})
	list := func() map[string][]string {
		code, body := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/replicas", testToken, "")
		var got struct {
			Replicas []ReplicaView `json:"replicas"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("replicas = %d %s", code, body)
		}
		out := map[string][]string{}
		for _, rv := range got.Replicas {
			out[rv.Replica] = rv.Leads
		}
		return out
	}
	var got map[string][]string
	testkit.WaitFor(t, 5*time.Second, "both replicas listed", func() bool {
		// The dead replica beats until it has been listed: starting the
		// live one can take longer than its presence on a busy machine.
		// Other tests' replicas may be listed too.
		if err := writeHeartbeat(ctx, rdb, dead, presence, heartbeat{Version: "old", Started: time.Now(), Seen: time.Now()}); err != nil {
			t.Fatal(err)
		}
		got = list()
		_, okLive := got[live]
		_, okDead := got[dead]
		return okLive && okDead
	})
	if len(got[dead]) != 1 || len(got[live]) != 0 {
		t.Fatalf("leads while the dead replica's lease lives: %v", got)
	}

	// The lease moves on, as it does a TTL after the leader died.
	if err := rdb.Set(ctx, lease, live+":2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got = list()
	if len(got[live]) != 1 || got[live][0] != chain || len(got[dead]) != 0 {
		t.Fatalf("leads after the lease moved: %v (one leader, the lease holder)", got)
	}
	start := time.Now()
	testkit.WaitFor(t, 5*presence, "the dead replica gone", func() bool { got = list(); _, ok := got[dead]; return !ok })
	t.Logf("dead replica gone from the list %v after the lease moved (presence TTL %v)", time.Since(start).Round(time.Millisecond), presence)
	if _, ok := got[live]; !ok {
		t.Fatalf("the live replica left the list too: %v", got)
	}
	if n, _ := rdb.HExists(ctx, keyspace.Replicas, dead).Result(); n {
		t.Errorf("the dead replica's entry is still in %s", keyspace.Replicas)
	}
}

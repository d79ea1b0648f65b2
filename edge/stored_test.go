package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
)

// Stored tenants and keys go through Redis and back as written, the
// key's secret replaced by its hash; every write moves the version, and
// a delete removes the entry.
func TestScopeStoreRoundTrip(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{scopes-" + token + "}*" })
	s := NewScopeStore(rdb, "scopes-"+token)
	ctx := context.Background()
	v0, err := s.Version(ctx)
	if err != nil || v0 != 0 {
		t.Fatalf("Version before any write: %d %v", v0, err)
	}
	tn := Tenant{Name: "team-a", Chains: []string{"eth"}, Methods: []string{"eth_call"}, RateLimit: Rate{RPS: 5, Burst: 10},
		Credits: Budget{PerMinute: 100}}
	const secret = "a-secret-of-sixteen-plus"
	if err := s.PutTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if err := s.PutKey(ctx, APIKey{Name: "k1", Key: secret, Tenant: "team-a"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := rdb.HGetAll(ctx, keyspace.ScopesKeys("scopes-"+token).Keys).Result()
	if strings.Contains(raw["k1"], secret) || !strings.Contains(raw["k1"], "key_sha256") {
		t.Errorf("stored key %q: want its hash, never its secret", raw["k1"])
	}
	st, bad, err := s.Load(ctx)
	if err != nil || len(bad) > 0 {
		t.Fatalf("Load: %v %v", bad, err)
	}
	if st.Version != 2 || len(st.Tenants) != 1 || st.Tenants[0].Name != "team-a" || st.Tenants[0].RateLimit.RPS != 5 ||
		st.Tenants[0].Credits.PerMinute != 100 || len(st.Keys) != 1 || st.Keys[0].Key != "" || st.Keys[0].Tenant != "team-a" {
		t.Fatalf("Load: %+v", st)
	}
	if h, _ := keyHash(st.Keys[0]); h != mustHash(secret) {
		t.Error("the stored hash does not match the key")
	}
	if ok, err := s.DeleteKey(ctx, "k1"); !ok || err != nil {
		t.Fatalf("DeleteKey: %v %v", ok, err)
	}
	if ok, _ := s.DeleteKey(ctx, "k1"); ok {
		t.Error("a second DeleteKey found the key")
	}
	st, _, _ = s.Load(ctx)
	if len(st.Keys) != 0 || st.Version != 4 {
		t.Errorf("after delete: %+v", st)
	}
}

func mustHash(secret string) [32]byte {
	h, _ := keyHash(APIKey{Key: secret})
	return h
}

// A stored entry the file has one of the name of, or one invalid as the
// file's would be, or a key naming no tenant, is left out and named; the
// rest are merged. The problems never quote a key.
func TestMergeStored(t *testing.T) {
	base := Config{Tenants: []Tenant{{Name: "file-tenant"}},
		Auth: AuthConfig{Keys: []APIKey{{Name: "file-key", Key: "file-secret-0123456789"}}}}
	st := Stored{
		Tenants: []Tenant{{Name: "file-tenant", Chains: []string{"eth"}}, {Name: "ok"}, {Name: "bad-chain", Chains: []string{"nope"}}},
		Keys: []APIKey{
			HashKey(APIKey{Name: "file-key", Key: "other-secret-0123456789"}),
			HashKey(APIKey{Name: "same-secret", Key: "file-secret-0123456789"}),
			HashKey(APIKey{Name: "no-tenant", Key: "third-secret-0123456789", Tenant: "gone"}),
			HashKey(APIKey{Name: "good", Key: "fourth-secret-0123456789", Tenant: "ok"}),
			{Name: "plain", Key: "plain-secret-0123456789"},
		},
	}
	merged, probs := Merge(base, st, []string{"eth"})
	var names []string
	for _, p := range probs {
		names = append(names, p.Kind+":"+p.Name)
		if strings.Contains(p.Error(), "secret-0123456789") {
			t.Errorf("problem quotes a key: %v", p)
		}
	}
	want := "tenant:file-tenant tenant:bad-chain key:file-key key:same-secret key:no-tenant key:plain"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("problems %s, want %s", got, want)
	}
	if len(merged.Tenants) != 2 || merged.Tenants[1].Name != "ok" || len(merged.Auth.Keys) != 2 || merged.Auth.Keys[1].Name != "good" {
		t.Errorf("merged %+v", merged)
	}
	if err := merged.WithDefaults().Validate([]string{"eth"}); err != nil {
		t.Errorf("the merged config does not validate: %v", err)
	}
	if err := CheckStored(base, Stored{}, APIKey{Name: "new", Key: "short"}, []string{"eth"}); err == nil ||
		!strings.Contains(err.Error(), "at least 16") {
		t.Errorf("CheckStored of a short key: %v", err)
	}
	if err := CheckStored(base, st, Tenant{Name: "t2", Chains: []string{"eth"}}, []string{"eth"}); err != nil {
		t.Errorf("CheckStored of a good tenant, beside bad entries: %v", err)
	}
}

package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// A reloaded Edge goes by its own keys and shares the first one's
// metrics: no series is registered twice.
func TestReconfiguredKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	keys := func(name, key string) Config {
		return Config{Auth: AuthConfig{Keys: []APIKey{{Name: name, Key: key}}}}
	}
	e := New(keys("old", "k-old"), Options{Registerer: reg})
	next := e.Reconfigured(keys("new", "k-new"))
	admit := func(e *Edge, key string) bool {
		r := httptest.NewRequest("POST", "/eth", nil)
		r.Header.Set("X-Api-Key", key)
		_, refused := e.Admit(r, jrpc.Admission{Chain: "eth", Transport: jrpc.TransportHTTP})
		return refused == nil
	}
	if !admit(e, "k-old") || admit(e, "k-new") {
		t.Error("the first Edge changed")
	}
	if admit(next, "k-old") || !admit(next, "k-new") {
		t.Error("the reloaded Edge does not go by its keys")
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// A dropped chain's series go, on the Edge in force and on the metrics it
// shares with older ones, and a chain of the name added later counts
// afresh; another chain's series stay.
func TestDropChain(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := New(Config{Auth: AuthConfig{Keys: []APIKey{{Name: "k", Key: "secret"}}}}, Options{Registerer: reg})
	refuse := func(chain string) {
		t.Helper()
		r := httptest.NewRequest("POST", "/"+chain, nil)
		if _, refused := e.Admit(r, jrpc.Admission{Chain: chain, Transport: jrpc.TransportHTTP}); refused == nil {
			t.Fatal("admitted without a key")
		}
	}
	missing := func(chain string) float64 {
		return counterValue(t, reg, "venn_auth_rejections_total", map[string]string{"chain": chain, "reason": "missing_key"})
	}
	refuse("gone")
	refuse("gone")
	refuse("kept")
	e.DropChain("gone")
	if n := testkit.Series(t, reg, map[string]string{"chain": "gone"}); n != 0 {
		t.Errorf("%d series of the dropped chain left", n)
	}
	if got := missing("kept"); got != 1 {
		t.Errorf("the other chain's rejections: %v, want 1", got)
	}
	refuse("gone") // added again
	if got := missing("gone"); got != 1 {
		t.Errorf("rejections of the chain added again: %v, want 1 (counted afresh)", got)
	}
}

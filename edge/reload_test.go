package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

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

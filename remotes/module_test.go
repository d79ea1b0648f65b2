package remotes

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
)

// The fx wiring registers the remotes' metrics on the app's registry.
func TestModule(t *testing.T) {
	reg := prometheus.NewRegistry()
	var m *Metrics
	app := fxtest.New(t, fx.Supply(reg), Module, fx.Populate(&m))
	app.RequireStart()
	app.RequireStop()
	if m == nil {
		t.Fatal("no *Metrics provided")
	}
	m.forRemote("c", "r").ok.Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "venn_remote_calls_total" {
			return
		}
	}
	t.Fatal("venn_remote_calls_total is not on the app's registry")
}

package remotes

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
)

// Module gives an fx app the remotes' process-wide part: one *Metrics,
// registered on the app's *prometheus.Registry. Pools are per chain and
// built from config by the app (NewPool), which knows how many there are.
var Module = fx.Module("remotes",
	fx.Provide(func(reg *prometheus.Registry) *Metrics { return NewMetrics(reg) }),
)

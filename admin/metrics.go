package admin

import "github.com/prometheus/client_golang/prometheus"

// Actions and outcomes: the labels of venn_admin_actions_total.
const (
	actionCordon   = "cordon"
	actionUncordon = "uncordon"
	actionDrain    = "drain"
	actionReload   = "reload"
	actionPurge    = "purge"

	outcomeOK           = "ok"
	outcomeRefused      = "refused"      // a bad request: unknown chain or remote, bad expiry
	outcomeUnauthorized = "unauthorized" // no or a wrong token
	outcomeError        = "error"        // the action failed (Redis, an invalid reload)
)

type metrics struct {
	actions *prometheus.CounterVec // action, outcome
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "admin", Name: "actions_total",
			Help: "Admin API actions (cordon, uncordon, drain, reload) by outcome: ok, refused, unauthorized, error."},
			[]string{"action", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.actions)
	}
	return m
}

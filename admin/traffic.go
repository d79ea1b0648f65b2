package admin

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Traffic is a chain's calls since this replica started, from its metrics:
// where they were answered (venn_answers_total by source) and the share
// that failed (venn_requests_total, outcome other than ok).
type Traffic struct {
	Answers    map[string]float64 `json:"answers"` // by source: local, head, history, forger, cache, remotes
	Requests   float64            `json:"requests"`
	ErrorShare float64            `json:"error_share"`
}

// traffic reads every chain's traffic from g; nil g reads nothing.
func traffic(g prometheus.Gatherer) map[string]*Traffic {
	out := map[string]*Traffic{}
	if g == nil {
		return out
	}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	of := func(chain string) *Traffic {
		t := out[chain]
		if t == nil {
			t = &Traffic{Answers: map[string]float64{}}
			out[chain] = t
		}
		return t
	}
	errs := map[string]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "venn_answers_total":
			for _, m := range mf.GetMetric() {
				of(label(m, "chain")).Answers[label(m, "source")] += m.GetCounter().GetValue()
			}
		case "venn_requests_total":
			for _, m := range mf.GetMetric() {
				c, v := label(m, "chain"), m.GetCounter().GetValue()
				of(c).Requests += v
				if label(m, "outcome") != "ok" {
					errs[c] += v
				}
			}
		}
	}
	for c, t := range out {
		if t.Requests > 0 {
			t.ErrorShare = errs[c] / t.Requests
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

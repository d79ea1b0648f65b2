package admin

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Traffic is a chain's calls since this replica started, from its metrics:
// where they were answered (venn_answers_total by source), and the share
// that failed (venn_requests_total, outcome other than ok) recently: over
// the last errorWindow, as sampled by the reads (trafficHistory).
type Traffic struct {
	Answers  map[string]float64 `json:"answers"` // by source: local, head, history, forger, cache, remotes
	Requests float64            `json:"requests"`
	// ErrorShare is over the last ErrorShareSeconds (0: since start, the
	// first read).
	ErrorShare        float64 `json:"error_share"`
	ErrorShareSeconds float64 `json:"error_share_seconds"`
	errors            float64 // since start
}

// gather reads g's metric families once for all the figures a read
// derives from them; nil g, or a failed gather, reads none.
func gather(g prometheus.Gatherer) []*dto.MetricFamily {
	if g == nil {
		return nil
	}
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	return mfs
}

// traffic reads every chain's traffic from the gathered mfs.
func traffic(mfs []*dto.MetricFamily) map[string]*Traffic {
	out := map[string]*Traffic{}
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
		t.errors = errs[c]
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

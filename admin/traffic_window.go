package admin

import (
	"sync"
	"time"
)

// The card's error share is recent: a share since start hides an outage
// under hours of good calls. Each read of the traffic keeps a sample of
// the counters (at most one per trafficSampleEvery) and measures against
// the newest sample at least errorWindow old, or the oldest kept.
const (
	errorWindow        = 5 * time.Minute
	trafficSampleEvery = 10 * time.Second
)

type trafficSample struct {
	at               time.Time
	requests, errors float64
}

// trafficHistory holds each chain's samples: about errorWindow /
// trafficSampleEvery of them.
type trafficHistory struct {
	mu      sync.Mutex
	byChain map[string][]trafficSample
}

// recent turns tr's error shares into recent ones as of now, and samples
// tr.
func (h *trafficHistory) recent(now time.Time, tr map[string]*Traffic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byChain == nil {
		h.byChain = map[string][]trafficSample{}
	}
	for chain := range h.byChain {
		if tr[chain] == nil {
			delete(h.byChain, chain)
		}
	}
	cut := now.Add(-errorWindow)
	for chain, t := range tr {
		ss := h.byChain[chain]
		if len(ss) > 0 && t.Requests < ss[len(ss)-1].requests {
			ss = nil // the counters started again (the chain was re-added)
		}
		for len(ss) > 1 && !ss[1].at.After(cut) {
			ss = ss[1:] // the baseline is the newest sample at or before cut
		}
		if len(ss) > 0 {
			b := ss[0]
			t.ErrorShare, t.ErrorShareSeconds = 0, now.Sub(b.at).Seconds()
			if n := t.Requests - b.requests; n > 0 {
				t.ErrorShare = (t.errors - b.errors) / n
			}
		}
		if len(ss) == 0 || now.Sub(ss[len(ss)-1].at) >= trafficSampleEvery {
			ss = append(ss, trafficSample{at: now, requests: t.Requests, errors: t.errors})
		}
		h.byChain[chain] = ss
	}
}

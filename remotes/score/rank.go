package score

import "math"

// Entry is one remote in a scoring: its terms, which the pool reads, and
// its score and place in the preferred set, which Rank decides.
type Entry struct {
	Group      int     // its tier: Rank ranks one group at a time
	Latency    float64 // the latency term, when Known
	Known      bool    // its latency is measured (enough samples)
	Penalty    float64 // the product of the penalty terms
	InRotation bool    // it could take a call now
	Preferred  bool    // in the preferred set: as it was before Rank, as it is after
	Score      float64 // set by Rank; lower is better
}

// Rank scores the entries of group and updates their preferred set, and
// returns the group's best score. An entry whose latency is not known yet
// is taken to be as fast as the best of its group, so only its penalties
// count. The best is the best among the entries in rotation (among all,
// when none is), and the set has hysteresis: an entry joins it within
// margin of the best and leaves it only past twice margin.
func Rank(es []Entry, group int, margin float64) (best float64) {
	// The group's best latency stands in for the unknown ones.
	bestLat := math.Inf(1)
	for pass := 0; pass < 2 && math.IsInf(bestLat, 1); pass++ {
		for _, e := range es {
			if e.Group == group && e.Known && (e.InRotation || pass == 1) {
				bestLat = min(bestLat, e.Latency)
			}
		}
	}
	if math.IsInf(bestLat, 1) {
		bestLat = 1
	}
	best = math.Inf(1)
	for pass := 0; pass < 2 && math.IsInf(best, 1); pass++ {
		for i := range es {
			e := &es[i]
			if e.Group != group {
				continue
			}
			l := e.Latency
			if !e.Known {
				l = bestLat
			}
			e.Score = l * e.Penalty
			if e.InRotation || pass == 1 {
				best = min(best, e.Score)
			}
		}
	}
	for i := range es {
		if e := &es[i]; e.Group == group {
			e.Preferred = e.Score <= best*(1+margin) || e.Preferred && e.Score <= best*(1+2*margin)
		}
	}
	return best
}

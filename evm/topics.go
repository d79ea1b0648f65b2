package evm

// TopicCriteria returns the criteria of topic positions read and checked
// elsewhere (a logs subscription, under limits of its own): topics[i] lists
// position i's alternatives as 0x-prefixed hex, nil or empty for any topic.
// The criteria share one buffer of their own, so they keep none of the
// caller's alive; matched with MatchTopics, they match as a LogFilter does.
func TopicCriteria(topics [][]string) []Criterion {
	if len(topics) == 0 {
		return nil
	}
	size := 0
	for _, alts := range topics {
		size += 2 // [ ]
		for _, t := range alts {
			size += len(t) + 3 // "t",
		}
	}
	// Sized exactly: buf never grows, so the sub-slices stay in it.
	buf := make([]byte, 0, size)
	out := make([]Criterion, len(topics))
	for i, alts := range topics {
		if len(alts) == 0 {
			continue
		}
		start := len(buf)
		buf = append(buf, '[')
		for j, t := range alts {
			if j > 0 {
				buf = append(buf, ',')
			}
			v := len(buf)
			buf = append(buf, '"')
			buf = append(buf, t...)
			buf = append(buf, '"')
			out[i].add(buf[v:len(buf):len(buf)])
		}
		buf = append(buf, ']')
		out[i].raw = buf[start:len(buf):len(buf)]
	}
	return out
}

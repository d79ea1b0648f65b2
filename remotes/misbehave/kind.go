package misbehave

// Kinds of misbehaviour: the kind label of venn_remote_misbehaviour_total
// and of misbehaviour log lines.
const (
	// Disagree: an answer that differs from the one a quorum accepted.
	Disagree = "disagree"
	// DisagreeTip: the same about a block within max_lag of the head,
	// where honest remotes can be on different forks for a moment. Logged
	// and counted, but not punished.
	DisagreeTip = "disagree_tip"
	// Integrity: data that fails a local check (a block hash that is not
	// the hash of its header, a root that does not match its list).
	Integrity = "integrity"
	// BogusHead: a head far beyond what the block time allows that no
	// other remote confirms.
	BogusHead = "bogus_head"
)

// Label bounds the label set: kinds come from code, but a typo must not
// grow it.
func Label(kind string) string {
	switch kind {
	case Disagree, DisagreeTip, Integrity, BogusHead:
		return kind
	}
	return "other"
}

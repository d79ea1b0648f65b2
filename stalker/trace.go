package stalker

// The leader's spans: each block fetch and each archive write is a trace
// of its own (the sampler's to keep), with the remotes' sends of a fetch
// (remotes/trace.go) under it.
const (
	spanFetch   = "venn.stalker.fetch"
	spanArchive = "venn.archive.put"
)

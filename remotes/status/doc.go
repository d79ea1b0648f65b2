// Package status is what the pool reports of its remotes: each remote as
// the pool sees it now (Remote: rotation and the reasons it is out, head
// and lag, latency, score terms, budget, cordon, windows of old data, last
// failure), the reason codes (Out*), an operator's cordon (Cordon), and
// what a caller told "no remote" sees of them (Reason, ReasonsOf, Text),
// with the sums a caller takes of one read (InFlight, Names).
//
// It owns these report types and nothing else: remotes fills them
// (Pool.Status, the -32050 data) from its remotes' state; the admin API,
// /readyz and the subcommands read them. It reads no remote, decides no
// rotation, and holds no URL: a remote is named, its errors redacted.
package status

// Package consensus is what a vote among remotes decides, without the
// remotes: the rules a chain writes (rule.go: which methods, how many
// remotes, how many must agree, what a dispute answers) and their checks,
// the canonical form two answers are compared in (canonical.go: sorted
// keys, ignored fields dropped, errors by code and data), and the tally
// (tally.go: ballots grouped into answers, the one with quorum, the most
// common one a dispute policy picks).
//
// It sends no call and judges no reply: remotes' voted strategy asks the
// remotes, decides what votes, punishes the ones that disagreed and
// answers the caller. A voter is whatever the pool counts as one (a
// *remotes.Remote); this package only groups and ranks them.
package consensus

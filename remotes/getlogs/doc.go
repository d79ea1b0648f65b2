// Package getlogs splits an eth_getLogs call too large for one remote: a
// block range into parts run with bounded concurrency and merged in order
// (Split.Run), a part refused as too large split again (to the span the
// remote named, else in half), and one block's filter split by halves of
// its address list, merged back by logIndex (Split.ByAddress). It owns the
// split's bounds (parts, bytes, nesting), the ranges and filters it
// writes, and its own answers when a bound is hit (LimitError,
// TimeoutError, or the remote's TooLarge refusal).
//
// It knows no Pool or Remote: each part goes out through a Sender, which
// remotes (getlogs.go) implements with its selection and judge, and which
// decides which remote takes it. It chooses no remote, judges no reply
// beyond the logs being an array (Array), and keeps no state past one
// call.
package getlogs

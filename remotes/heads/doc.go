// Package heads is what a chain's head tracking computes that needs no
// remote: a reported head (Report, ParseReport) and whether one can follow
// another on one chain (Plausible, with the corroboration limits); the
// chain's tip, judged from every member's reports, and its block time
// (Tracker, over the small Member interface it declares); the block time
// learned from the heads' timestamps (Clock); the
// leader's poll plan, polling when the next block is due (Plan); the run
// of recent canonical hashes the tip says (Chain); the stall watch that
// tells when the heads may be old news (Stalls); and a remote's newHeads
// subscription, redialled with backoff (Watch).
//
// It owns these computations and nothing else. It knows no Pool or
// Remote: remotes.Heads, which the pool owns and hands out (Pool.Heads),
// hands it the remotes as Members, acts on what it judged (logs, the
// misbehaviour record, lag), and polls and checks the remotes. It sends no
// call but the newHeads subscription, keeps of a remote's state only its
// Judgement, which the remote holds, and decides nothing about rotation.
package heads

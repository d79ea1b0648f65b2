// Package verified is what a verified call decides without the pool: which
// local checks of package integrity a client's call gets (For, with the
// head window as Blocks), which answer of those remotes sent is served and
// with what verdict, who lied (an answer that failed a check another
// answer passed) and which checks a chain skips for a while because every
// remote failed them alike (Chain), and their series (Metrics).
//
// It knows no Pool or Remote and sends no call: remotes sends the call,
// runs Call.Check on each answer as its judge sees it, and charges and
// reports the liars Call.Serve names through the function it is given.
package verified

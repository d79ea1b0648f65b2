package remotes

// Distrust: a remote found on another chain (chaincheck.go), misbehaving
// (misbehave.go: it disagreed with a vote, failed an integrity check
// another answer passed, claimed a head nothing corroborates) or cordoned
// for it may have answered wrongly for a while before it was found out,
// and whatever keeps its answers (the response cache) must drop them. The
// pool says so once per finding, from where the finding is made, to the
// function PoolConfig.OnDistrust, with the time of the remote's last good
// check: its answers since are suspect.
//
// A remote's last good check is the last chain id check that said the
// chain while nothing was held against it: this replica's own, or, for a
// remote whose heads come from the leader's feed (and whose chain this
// replica does not check), the leader's, which the feed carries. Its answers are not checks of
// it: an answer that passed a block's integrity check says nothing of the
// remote's state answers, and a remote that lies about state passes every
// block check. While it is under suspicion (on another chain, out of
// rotation until checked, or within cordon.within of a misbehaviour, or
// cordoned) a passed check does not move the time: the answers of a remote
// that lies now and then are dropped back to before the first lie seen.
// A lie that began before its last good check is not seen by it; an
// operator drops those by the admin API (a purge by remote).

import "time"

// Distrust causes: the cause of a Distrust, and a metric label.
const (
	DistrustWrongChain = "wrong_chain"
	DistrustCordoned   = "cordoned"
	// The misbehaviour kinds (misbehave.Disagree, Integrity, BogusHead)
	// are causes too.
)

// Distrust is a remote whose answers since its last good check are no
// longer to be trusted.
type Distrust struct {
	// Chain and Remote name it (never its URL).
	Chain, Remote string
	// Since is the time of its last good check. A remote that never
	// passed one was never in rotation: it is not reported.
	Since time.Time
	// Cause: DistrustWrongChain, DistrustCordoned, or the kind of
	// misbehaviour (disagree, integrity, bogus_head).
	Cause string
}

// distrusted tells PoolConfig.OnDistrust that r's answers since its last
// good check are suspect, unless r never passed one.
func (p *Pool) distrusted(r *Remote, cause string) {
	fn := p.conf().OnDistrust
	good := r.goodAt.Load()
	if fn == nil || good == 0 {
		return
	}
	fn(Distrust{Chain: r.chain, Remote: r.Name(), Since: time.Unix(0, good), Cause: cause})
}

// checkPassed records a good check of r at now, unless r is under
// suspicion.
func (r *Remote) checkPassed(now time.Time) { r.checkPassedAt(now, now) }

// checkPassedAt records a good check of r made at at (the leader's, told
// by its feed), unless r is under suspicion now or it is older than the
// one r holds.
func (r *Remote) checkPassedAt(now, at time.Time) {
	if now.UnixNano() < r.mb.suspectUntil.Load() || !r.chainVerified() {
		return
	}
	for {
		old := r.goodAt.Load()
		if at.UnixNano() <= old || r.goodAt.CompareAndSwap(old, at.UnixNano()) {
			return
		}
	}
}

// suspect holds r's last good check until at least until; it reports
// whether r was not under suspicion already (a finding to report).
func (r *Remote) suspect(now, until time.Time) (fresh bool) {
	for {
		old := r.mb.suspectUntil.Load()
		if until.UnixNano() <= old {
			return now.UnixNano() >= old
		}
		if r.mb.suspectUntil.CompareAndSwap(old, until.UnixNano()) {
			return now.UnixNano() >= old
		}
	}
}

package remotes

import (
	"reflect"
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// A remote found on another chain or misbehaving is reported once per
// finding, with its last good check: the chain id check that last said
// the chain while nothing was held against it. Checks passed under
// suspicion do not move it, and a remote never verified is not reported
// (it was never in rotation, so nothing of it was kept).
func TestDistrustReportsTheLastGoodCheck(t *testing.T) {
	type step struct {
		at   time.Duration
		do   string // ok, wrong (chain checks), or a misbehaviour kind
		want string // the cause reported ("": none)
		// since: the Since reported, as an offset of the start.
		since time.Duration
	}
	tests := []struct {
		name     string
		verified bool // the remote passed a check before the steps
		steps    []step
	}{
		{name: "switched chain", steps: []step{
			{at: 0, do: "ok"},
			{at: 30 * time.Second, do: "ok"},
			{at: 50 * time.Second, do: "wrong", want: DistrustWrongChain, since: 30 * time.Second},
			{at: 60 * time.Second, do: "wrong"}, // still there: known
			{at: 70 * time.Second, do: "ok"},    // back: a good check again
			{at: 90 * time.Second, do: "wrong", want: DistrustWrongChain, since: 70 * time.Second},
		}},
		{name: "never on the chain", steps: []step{
			{at: 0, do: "wrong"},
			{at: 10 * time.Second, do: "wrong"},
		}},
		{name: "misbehaviour up to a cordon", steps: []step{
			{at: 0, do: "ok"},
			{at: 10 * time.Second, do: misbehave.Disagree, want: misbehave.Disagree, since: 0},
			{at: 20 * time.Second, do: "ok"}, // under suspicion: not a good check
			{at: 30 * time.Second, do: misbehave.Integrity},
			{at: 40 * time.Second, do: misbehave.Disagree, want: DistrustCordoned, since: 0},
			{at: 50 * time.Second, do: "ok"}, // cordoned: not a good check
			{at: 6 * time.Minute, do: "ok"},  // the cordon over: good again
			{at: 7 * time.Minute, do: misbehave.BogusHead, want: misbehave.BogusHead, since: 6 * time.Minute},
		}},
		{name: "misbehaviours apart are findings apart", steps: []step{
			{at: 0, do: "ok"},
			{at: 10 * time.Second, do: misbehave.Integrity, want: misbehave.Integrity, since: 0},
			{at: 80 * time.Second, do: "ok"},
			{at: 90 * time.Second, do: misbehave.Integrity, want: misbehave.Integrity, since: 80 * time.Second},
		}},
		{name: "disagreements at the head are no findings", steps: []step{
			{at: 0, do: "ok"},
			{at: 10 * time.Second, do: misbehave.DisagreeTip},
			{at: 20 * time.Second, do: misbehave.DisagreeTip},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Distrust
			p, now := idlePool(t, 3, PoolConfig{ChainID: testChainID, OnDistrust: func(d Distrust) { got = append(got, d) }})
			r := p.members()[0]
			r.cc.Set(health.Unknown)
			r.now = func() time.Time { return *now }
			start := *now
			for i, s := range tt.steps {
				*now = start.Add(s.at)
				got = got[:0]
				switch s.do {
				case "ok":
					r.chainChecked(testChainID, testChainID)
				case "wrong":
					r.chainChecked(testChainID, testChainID+1)
				default:
					p.misbehaved(r, s.do, "eth_call", "test")
				}
				var want []Distrust
				if s.want != "" {
					want = []Distrust{{Chain: "test", Remote: "n0", Since: start.Add(s.since), Cause: s.want}}
				}
				if len(got) == 0 {
					got = nil
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%s at %v): reported %+v, want %+v", i, s.do, s.at, got, want)
				}
			}
		})
	}
}

// A replacement of a remote at the same endpoint (a key rotation) keeps
// its last good check: the answers of the old one since are its own.
func TestDistrustCarriesOverARotation(t *testing.T) {
	p, now := idlePool(t, 2, PoolConfig{ChainID: testChainID})
	old, r := p.members()[0], p.members()[1]
	old.now = func() time.Time { return *now }
	old.chainChecked(testChainID, testChainID)
	p.carryOver(r, old)
	if got, want := r.LastGoodCheck(), *now; !got.Equal(want) {
		t.Fatalf("replacement's last good check %v, want the old one's %v", got, want)
	}
}

// A replica fed a remote's heads by the leader does not check its chain:
// it takes the leader's last good check from the feed, so that its own
// finding, later, reaches back no further than the leader's.
func TestDistrustLastGoodCheckFromTheFeed(t *testing.T) {
	leader, now := idlePool(t, 2, PoolConfig{ChainID: testChainID})
	follower, _ := idlePool(t, 2, PoolConfig{ChainID: testChainID})
	follower.now = func() time.Time { return *now }
	lr, fr := leader.members()[0], follower.members()[0]
	lr.now = func() time.Time { return *now }
	checked := *now
	lr.chainChecked(testChainID, testChainID)
	lr.claim.Store(&heads.Report{Number: 10, Hash: "0x0a", Parent: "0x09", Seen: checked})
	*now = now.Add(30 * time.Second)
	heads := leader.Heads().RemoteHeads()
	if len(heads) != 1 || heads[0].GoodAge != 30*time.Second {
		t.Fatalf("the leader's feed: %+v, want n0 checked 30s before", heads)
	}
	follower.Heads().FeedHeads(heads)
	if got := fr.LastGoodCheck(); !got.Equal(checked) {
		t.Fatalf("the fed remote's last good check %v, want the leader's %v", got, checked)
	}
	// An older one, from a feed late to arrive, does not move it back.
	follower.Heads().FeedHeads([]RemoteHead{{Remote: "n0", Number: 10, Hash: "0x0a", Parent: "0x09", GoodAge: time.Hour}})
	if got := fr.LastGoodCheck(); !got.Equal(checked) {
		t.Fatalf("a late feed moved the last good check back to %v", got)
	}
}

package stalker

// The remotes' heads, tracked once per cluster. Every replica used to poll
// every remote's head each block (or hold a newHeads stream to it), so a
// cluster's idle cost grew with its replica count. Now only the chain's
// leader tracks them: HeadShare.Lead publishes its pool's view of each
// remote's head to Redis whenever one moves, and at least once a block
// time; every other replica's HeadShare.Run feeds those heads to its pool,
// whose trackers then leave the fed remotes alone (remotes/feed.go).
//
// Followers hear the reports over pub/sub rather than polling a key: a
// report reaches them within milliseconds of the leader's, so their routing
// (a call for block N goes to a remote that has it) is as current as the
// leader's, at no Redis call per follower per block. The last report is
// also kept in a key whose TTL is the staleness limit, read whenever the
// subscription is made (again), so a follower starting or reconnecting
// does not wait for the next report.
//
// A follower never routes on a stale feed: when no report has come for
// feedStaleBlocks block times (the leader died, Redis is lost), or the
// newest head in it is that old, its pool tracks every remote itself again
// at once, until a fresh report comes.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// Feed staleness limits.
const (
	// feedStaleBlocks block times without a fresh report make the feed
	// stale: the leader reports at least once a block time.
	feedStaleBlocks = 3
	// minFeedStale floors the limit on fast chains, so that a GC pause or
	// a busy Redis does not flap every follower to its own tracking.
	minFeedStale = time.Second
	// maxHeadsReport bounds a report read from Redis: 64 remotes take a
	// few KiB.
	maxHeadsReport = 1 << 20
)

// Head tracking modes, as the metrics and /readyz name them.
const (
	// HeadsLeader: this replica leads; it tracks the heads and publishes
	// them.
	HeadsLeader = "leader"
	// HeadsFeed: the heads come from the leader's feed.
	HeadsFeed = "feed"
	// HeadsOwn: a follower tracking the heads itself: no fresh feed yet,
	// or it went stale.
	HeadsOwn = "own"
)

var headsModes = []string{HeadsLeader, HeadsFeed, HeadsOwn}

// SharedHeads is the head tracking whose remotes' heads are shared: a
// pool's (remotes.Heads).
type SharedHeads interface {
	RemoteHeads() []remotes.RemoteHead
	ClaimsChanged() <-chan struct{}
	FeedHeads([]remotes.RemoteHead)
	TrackHeads()
	Fed() int
	BlockTime() time.Duration
}

// headsReport is what the leader publishes.
type headsReport struct {
	Epoch uint64               `json:"epoch"`
	Heads []remotes.RemoteHead `json:"heads"`
	// At is when the leader took it, in Unix nanoseconds (0 from a leader
	// that does not say): a report older than the staleness limit is old
	// news, such as those a paused follower finds queued when it wakes.
	At int64 `json:"at,omitempty"`
}

// HeadShare shares one chain's remotes' heads across the cluster.
type HeadShare struct {
	rdb   redis.UniversalClient
	keys  keyspace.Chain
	heads SharedHeads
	log   *slog.Logger
	modes map[string]prometheus.Gauge
	stale prometheus.Counter

	mu      sync.Mutex
	leading bool
	mode    string
}

// NewHeadShare returns the head share of chain's head tracking on rdb. It
// does no I/O.
func NewHeadShare(rdb redis.UniversalClient, chain string, heads SharedHeads, log *slog.Logger, m *HeadShareMetrics) *HeadShare {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewHeadShareMetrics(nil)
	}
	s := &HeadShare{rdb: rdb, keys: keyspace.For(chain), heads: heads, log: log.With("chain", chain),
		modes: map[string]prometheus.Gauge{}, stale: m.stale.WithLabelValues(chain)}
	for _, mode := range headsModes {
		s.modes[mode] = m.mode.WithLabelValues(chain, mode)
	}
	s.setMode(HeadsOwn)
	return s
}

// Mode is how this replica tracks the heads now: HeadsLeader, HeadsFeed or
// HeadsOwn.
func (s *HeadShare) Mode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// setMode records mode; s.mu must be held, or s not yet shared.
func (s *HeadShare) setMode(mode string) {
	s.mode = mode
	for m, g := range s.modes {
		if m == mode {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// staleAfter is how long a report stays fresh.
func (s *HeadShare) staleAfter() time.Duration {
	return max(feedStaleBlocks*s.heads.BlockTime(), minFeedStale)
}

// Lead publishes the pool's heads for the leadership with epoch until ctx
// ends: whenever a remote reports a new head, and at least once a block
// time so that followers can tell a quiet chain from a dead leader. The
// pool tracks every remote itself meanwhile.
func (s *HeadShare) Lead(ctx context.Context, epoch uint64) {
	s.mu.Lock()
	s.leading = true
	s.heads.TrackHeads()
	s.setMode(HeadsLeader)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.leading = false
		s.setMode(HeadsOwn) // until a new leader's report comes
		s.mu.Unlock()
	}()
	beat := time.NewTimer(0)
	defer beat.Stop()
	failing := false
	for {
		claims := s.heads.ClaimsChanged()
		select {
		case <-ctx.Done():
			return
		case <-claims:
		case <-beat.C:
		}
		err := s.publish(ctx, epoch)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			// Once per outage: the election says whether it still leads.
			s.log.Warn("remote heads not published", "err", err)
			failing = true
		case err == nil && failing:
			s.log.Info("remote heads published again")
			failing = false
		}
		beat.Reset(s.heads.BlockTime())
	}
}

// publish stores and announces one report, fenced by epoch.
func (s *HeadShare) publish(ctx context.Context, epoch uint64) error {
	b, err := json.Marshal(headsReport{Epoch: epoch, Heads: s.heads.RemoteHeads(), At: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.heads.BlockTime())
	defer cancel()
	return keyspace.PublishHeads.Run(ctx, s.rdb, s.keys.HeadsKeys(), epoch, b,
		s.staleAfter().Milliseconds(), s.keys.HeadsNotify).Err()
}

// Run follows the leader's reports until ctx ends, feeding them to the
// pool while this replica does not lead, and hands the remotes back to
// the pool's own trackers when the feed goes stale.
func (s *HeadShare) Run(ctx context.Context) {
	// go-redis subscribes again after a lost connection by itself, and
	// says so with a *redis.Subscription: the snapshot is read then.
	sub := s.rdb.Subscribe(ctx, s.keys.HeadsNotify)
	defer sub.Close()
	msgs := sub.ChannelWithSubscriptions()
	stale := time.NewTimer(s.staleAfter())
	defer stale.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					s.snapshot(ctx, stale)
				}
			case *redis.Message:
				s.take(m.Payload, s.staleAfter(), stale)
			}
		case <-stale.C:
			s.goStale()
		}
	}
}

// snapshot reads the last report, which is fresh for as long as its key
// lives.
func (s *HeadShare) snapshot(ctx context.Context, stale *time.Timer) {
	ctx, cancel := context.WithTimeout(ctx, s.staleAfter())
	defer cancel()
	var get *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, s.keys.Heads)
		ttl = p.PTTL(ctx, s.keys.Heads)
		return nil
	})
	switch {
	case errors.Is(err, redis.Nil):
		return // no leader has reported lately
	case err != nil:
		s.log.Debug("remote heads snapshot not read", "err", err)
		return
	}
	if d := ttl.Val(); d > 0 {
		s.take(get.Val(), d, stale)
	}
}

// take feeds one report to the pool, fresh for fresh from now, unless this
// replica leads (it is its own report) or the report is stale already.
func (s *HeadShare) take(payload string, fresh time.Duration, stale *time.Timer) {
	var rep headsReport
	if len(payload) > maxHeadsReport || json.Unmarshal([]byte(payload), &rep) != nil {
		s.log.Debug("malformed remote heads report ignored", "bytes", len(payload))
		return
	}
	if rep.At > 0 && time.Since(time.Unix(0, rep.At)) > s.staleAfter() {
		// Taken long ago (this replica was paused, or the report sat in
		// a queue): its heads would make old heads look current.
		s.log.Debug("old remote heads report ignored", "age", time.Since(time.Unix(0, rep.At)))
		return
	}
	newest := time.Duration(-1)
	for _, h := range rep.Heads {
		if newest < 0 || h.Age < newest {
			newest = h.Age
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leading {
		return
	}
	if newest < 0 || newest >= s.staleAfter() {
		// The leader's remotes are all silent, or it has none in
		// rotation: this replica's own tracking may do better.
		s.staleLocked()
		return
	}
	stale.Reset(fresh - newest)
	s.heads.FeedHeads(rep.Heads)
	mode := HeadsOwn
	if s.heads.Fed() > 0 {
		mode = HeadsFeed
	}
	if mode != s.mode {
		s.log.Info("remote heads taken from the leader's feed", "fed_remotes", s.heads.Fed())
	}
	s.setMode(mode)
}

// goStale hands the remotes back to the pool's own trackers: no fresh
// report came in time.
func (s *HeadShare) goStale() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leading {
		s.staleLocked()
	}
}

func (s *HeadShare) staleLocked() {
	if s.mode != HeadsFeed {
		return
	}
	s.heads.TrackHeads()
	s.stale.Inc()
	s.log.Info("leader's remote heads feed stale; tracking the remotes here", "stale_after", s.staleAfter())
	s.setMode(HeadsOwn)
}

// HeadShareMetrics are the head share's series, labelled by chain.
type HeadShareMetrics struct {
	mode  *prometheus.GaugeVec
	stale *prometheus.CounterVec
}

// NewHeadShareMetrics registers the head share's series on reg; a nil reg
// registers nothing (the series still work).
func NewHeadShareMetrics(reg prometheus.Registerer) *HeadShareMetrics {
	m := &HeadShareMetrics{
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "head_tracking",
			Help: "1 for how this replica tracks the chain's remotes' heads now: leader (tracks and publishes them), " +
				"feed (takes the leader's), own (a follower without a fresh feed tracking them itself)."},
			[]string{"chain", "mode"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "head_feed_stale_total",
			Help: "Times the leader's remote heads feed went stale and this replica tracked the remotes itself again."},
			[]string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.mode, m.stale)
	}
	return m
}

// DropChain deletes chain's series, once its head share has stopped for
// good.
func (m *HeadShareMetrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	m.mode.DeletePartialMatch(l)
	m.stale.DeletePartialMatch(l)
}

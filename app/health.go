package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/emerald"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/status"
)

// healthHandler answers /readyz: ready when every chain has a remote in
// rotation and the process is not draining. The history store does not
// count unless postgres.required: the replicas of a cluster share it, so
// making its outage a 503 would take every replica out of the load
// balancer at once, while the remotes can answer every call (history
// reads fail fast and fall through). The body says how it is all the
// same, and "degraded" while the process serves without it.
type healthHandler struct {
	chains   *chains
	history  func() *blockstore.Readiness // nil result without postgres.url
	draining *atomic.Bool
	nats     func() *vnats.Status            // nil result without nats.url
	grpc     *atomic.Pointer[emerald.Server] // nil, or holding nil, without grpc_listen
}

// readiness is /readyz's body. Remotes are listed by name only: their URLs
// carry API keys.
type readiness struct {
	Ready    bool                  `json:"ready"`
	Draining bool                  `json:"draining,omitempty"`
	Reason   string                `json:"reason,omitempty"`   // why 503, beside the chains' own
	Degraded bool                  `json:"degraded,omitempty"` // serving without the history store
	History  *blockstore.Readiness `json:"history,omitempty"`  // nil without postgres.url
	// NATS is the NATS connection's state (nil without nats.url). It
	// never makes the process unready: HTTP serves whatever NATS does.
	NATS *vnats.Status `json:"nats,omitempty"`
	// GRPC is the gRPC listener's state (nil without grpc_listen); like
	// NATS it never makes the process unready.
	GRPC   *grpcReadiness   `json:"grpc,omitempty"`
	Chains []chainReadiness `json:"chains"`
}

// grpcReadiness is the gRPC listener's part: its address and whether it
// serves (false while stopping).
type grpcReadiness struct {
	Addr    string `json:"addr"`
	Serving bool   `json:"serving"`
}

// chainReadiness is one chain's part: whether it can serve, its head and
// how fresh it is, and how heads are followed. Durations are in seconds.
type chainReadiness struct {
	Chain    string `json:"chain"`
	Ready    bool   `json:"ready"`
	Head     uint64 `json:"head"`
	HeadHash string `json:"head_hash,omitempty"`
	// HeadAgeSeconds is the time since the head block's timestamp: on a
	// chain of 2 s blocks an age of 30 s says the head is stale.
	HeadAgeSeconds float64 `json:"head_age_seconds"`
	// WindowHead is this replica's head window's head (0: empty): below
	// Head by more than max_lag, calls go to the remotes.
	WindowHead       uint64  `json:"window_head"`
	BlockTimeSeconds float64 `json:"block_time_seconds"`
	// BlockTimeSource: config (block_time), learned (block timestamps) or
	// default (not learned yet).
	BlockTimeSource     string  `json:"block_time_source"`
	PollIntervalSeconds float64 `json:"poll_interval_seconds"`
	// HeadTracking says how this replica follows the remotes' heads in a
	// cluster: leader (tracks and publishes them), feed (takes the
	// leader's), own (no fresh feed: tracks them itself). Empty without
	// Redis, where every replica tracks them.
	HeadTracking string `json:"head_tracking,omitempty"`
	// NATSFeed is the chain's JetStream feed on this replica (empty when
	// off): idle (another replica leads), publishing, failing (NATS away
	// or refusing) or conflict (the stream has another shape). It never
	// makes the replica unready.
	NATSFeed string   `json:"nats_feed,omitempty"`
	Remotes  []string `json:"remotes"`
	// Reason says why the chain is not ready: each remote, why it is out
	// of rotation and the kind of its last failure.
	Reason string `json:"reason,omitempty"`
	// RemotesOut is each remote out of rotation: its reason codes and
	// what it last failed with (dns, refused, tls, wrong_chain, ...), the
	// text redacted (wire.PrivateHost: public host names stay).
	RemotesOut []remotes.RemoteReason `json:"remotes_out,omitempty"`
	// Availability is, by remote, the oldest block of each kind of data
	// (state, blocks, logs, traces) the remote is taken to serve and where
	// that comes from; older calls are not sent to it.
	Availability map[string][]remotes.Availability `json:"availability"`
}

func (h *healthHandler) ready(w http.ResponseWriter, _ *http.Request) {
	body := readiness{Ready: !h.draining.Load(), Draining: h.draining.Load()}
	now := time.Now()
	for _, c := range h.chains.all() {
		pool := c.Pool()
		hs := pool.Heads().HeadStatus()
		cr := chainReadiness{Chain: c.Name(), Ready: pool.Ready(), Head: pool.Heads().Head(), HeadHash: hs.Hash,
			BlockTimeSeconds: seconds(hs.BlockTime), BlockTimeSource: hs.BlockTimeSource,
			PollIntervalSeconds: seconds(hs.PollInterval), HeadTracking: c.HeadTracking(), NATSFeed: c.NATSFeed()}
		if !hs.Time.IsZero() {
			cr.HeadAgeSeconds = seconds(max(now.Sub(hs.Time), 0))
		}
		if n, ok := c.WindowHead(); ok {
			cr.WindowHead = n
		}
		rs := pool.Status()
		cr.Remotes = status.Names(rs)
		cr.Availability = availabilityOf(rs)
		if !cr.Ready {
			cr.Reason = notReadyReason(rs)
		}
		for _, r := range status.ReasonsOf(rs) {
			if !r.InRotation {
				cr.RemotesOut = append(cr.RemotesOut, r)
			}
		}
		body.Ready = body.Ready && cr.Ready
		body.Chains = append(body.Chains, cr)
	}
	if hr := h.history(); hr != nil {
		body.History = hr
		body.Degraded = hr.Degraded()
		body.Ready = body.Ready && hr.Ready()
		if !hr.Ready() {
			body.Reason = "history store " + hr.State + " (postgres.required)"
		}
	}
	if h.nats != nil {
		body.NATS = h.nats()
	}
	if h.grpc != nil {
		if g := h.grpc.Load(); g != nil {
			body.GRPC = &grpcReadiness{Serving: g.Serving()}
			if a := g.Addr(); a != nil {
				body.GRPC.Addr = a.String()
			}
		}
	}
	if body.Draining {
		body.Reason = "draining: leaderships handed over, load balancers to move traffic away"
	}
	w.Header().Set("Content-Type", "application/json")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// availabilityOf is each remote's windows of old data, by name.
func availabilityOf(rs []remotes.RemoteStatus) map[string][]remotes.Availability {
	out := make(map[string][]remotes.Availability, len(rs))
	for _, r := range rs {
		out[r.Name] = r.Availability
	}
	return out
}

// notReadyReason says why no remote of a chain is in rotation, remote by
// remote, by name, reason code and last failure's kind only: /readyz takes
// no token, and a reason's text may hold a cordon's free-text reason and a
// token's name.
func notReadyReason(rs []remotes.RemoteStatus) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		texts := make([]string, 0, len(r.Out))
		for _, o := range r.Out {
			texts = append(texts, o.Code)
		}
		if len(texts) == 0 {
			texts = append(texts, "in rotation")
		}
		part := r.Name + ": " + strings.Join(texts, ", ")
		if r.LastFailure != "" {
			part += " (last: " + r.LastFailure + ")"
		}
		parts = append(parts, part)
	}
	return "no remote in rotation: " + strings.Join(parts, "; ")
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

package misbehave

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"
)

// Bounds of what one misbehaviour records: details are short digests, never
// params or results.
const (
	maxDetail = 256
	maxMethod = 64
	// warnEvery spaces the warnings about one remote; the ones in between
	// go to debug (the counter and the file get every one).
	warnEvery = 10 * time.Second
)

// Recorder logs, counts and writes down a chain's misbehaviours, and
// counts its votes' outcomes. Safe for concurrent use; it never blocks.
type Recorder struct {
	chain string
	m     *Metrics
	log   *slog.Logger
	file  *fileLog // nil: no file
}

// NewRecorder records chain's misbehaviours in m (nil: unregistered
// series) and log, and, when path is set, as JSON lines appended to that
// file from Start to Stop. It does no I/O.
func NewRecorder(chain string, m *Metrics, log *slog.Logger, path string) *Recorder {
	if m == nil {
		m = NewMetrics(nil)
	}
	rec := &Recorder{chain: chain, m: m, log: log}
	if path != "" {
		rec.file = &fileLog{path: path, open: openAppend, log: log,
			dropped: m.logDropped.WithLabelValues(chain), queue: logQueue}
	}
	return rec
}

// Start opens the misbehaviour log, if there is one.
func (rec *Recorder) Start() error { return rec.file.start() }

// Stop writes what is queued and closes the log, at most until ctx ends.
func (rec *Recorder) Stop(ctx context.Context) error { return rec.file.stop(ctx) }

// Outcome counts a vote on method that ended in outcome.
func (rec *Recorder) Outcome(method, outcome string) {
	rec.m.consensus.WithLabelValues(rec.chain, method, outcome).Inc()
}

// Record notes that remote served data the pool could not trust: kind is
// one of the kinds, method the call, detail a short description (digests,
// a failed check's name; never params, results or URLs). It logs, counts
// and writes the event; warnedAt is the remote's, spacing the warnings
// about it. It returns the kind's label and whether the kind is evidence
// to punish (all but DisagreeTip).
func (rec *Recorder) Record(now time.Time, remote string, warnedAt *atomic.Int64, kind, method, detail string) (label string, punish bool) {
	label = Label(kind)
	if len(method) > maxMethod {
		method = method[:maxMethod]
	}
	if len(detail) > maxDetail {
		detail = detail[:maxDetail]
	}
	rec.m.misbehaviour.WithLabelValues(rec.chain, remote, label).Inc()

	level := slog.LevelDebug
	last := warnedAt.Load()
	if label != DisagreeTip && now.UnixNano()-last >= int64(warnEvery) && warnedAt.CompareAndSwap(last, now.UnixNano()) {
		level = slog.LevelWarn
	}
	rec.log.Log(context.Background(), level, "remote misbehaved", "remote", remote, "kind", label, "method", method, "detail", detail)

	if rec.file != nil {
		line, err := json.Marshal(Event{Time: now.UTC(), Chain: rec.chain, Remote: remote, Method: method, Kind: label, Detail: detail})
		if err == nil {
			rec.file.write(append(line, '\n'))
		}
	}
	return label, label != DisagreeTip
}

// Strike adds a strike at now to a remote's strikes, forgetting those
// older than within, and reports whether they reached limit: then they
// start again, and the remote has earned a cordon.
func Strike(strikes []int64, now time.Time, within time.Duration, limit int) ([]int64, bool) {
	cut := now.Add(-within).UnixNano()
	kept := strikes[:0]
	for _, t := range strikes {
		if t > cut {
			kept = append(kept, t)
		}
	}
	kept = append(kept, now.UnixNano())
	if len(kept) < limit {
		return kept, false
	}
	return kept[:0], true
}

// Metrics are the series the recorder counts in.
func (rec *Recorder) Metrics() *Metrics { return rec.m }

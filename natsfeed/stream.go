package natsfeed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// ConflictError: the stream exists with a shape the feed cannot publish
// to as configured (its subjects, retention, storage or discard policy).
// venn reports it and leaves the stream as it is: an operator changes it,
// or names another stream.
type ConflictError struct {
	Stream string
	Why    string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("natsfeed: stream %s exists with another configuration: %s; "+
		"venn does not change it (fix it, or set the chain's nats.stream_name)", e.Stream, e.Why)
}

// ensure creates the stream, or updates the retention fields venn owns
// (max_age, max_bytes, replicas, duplicate_window) when they differ, and
// returns it. A stream whose other fields conflict is a *ConflictError.
func (p *Publisher) ensure(ctx context.Context) (jetstream.Stream, error) {
	want := p.cfg.streamConfig(p.subj)
	s, err := p.js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = p.js.CreateStream(ctx, want)
		if err == nil {
			p.log.Info("natsfeed: stream created", "subjects", want.Subjects, "max_age", want.MaxAge, "max_bytes", want.MaxBytes)
			return s, nil
		}
		var err2 error
		if s, err2 = p.js.Stream(ctx, want.Name); err2 != nil { // another replica may have created it meanwhile
			return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	if why := conflict(have, want); why != "" {
		return nil, &ConflictError{Stream: want.Name, Why: why}
	}
	if have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes && have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates {
		return s, nil
	}
	upd := have
	upd.MaxAge, upd.MaxBytes, upd.Replicas, upd.Duplicates = want.MaxAge, want.MaxBytes, want.Replicas, want.Duplicates
	s, err = p.js.UpdateStream(ctx, upd)
	if err != nil {
		return nil, fmt.Errorf("update stream %s: %w", want.Name, err)
	}
	p.log.Info("natsfeed: stream retention updated", "max_age", want.MaxAge, "max_bytes", want.MaxBytes,
		"replicas", want.Replicas, "duplicate_window", want.Duplicates)
	return s, nil
}

// conflict says why have cannot hold the feed as want, or "".
func conflict(have, want jetstream.StreamConfig) string {
	var why []string
	if !slices.ContainsFunc(have.Subjects, func(s string) bool { return covers(s, want.Subjects[0]) }) {
		why = append(why, fmt.Sprintf("subjects %v do not take %s", have.Subjects, want.Subjects[0]))
	}
	if have.Retention != want.Retention {
		why = append(why, fmt.Sprintf("retention %s, not limits", have.Retention))
	}
	if have.Storage != want.Storage {
		why = append(why, fmt.Sprintf("storage %s, not %s", have.Storage, want.Storage))
	}
	if have.Discard != want.Discard {
		why = append(why, "discard new, not old")
	}
	if have.Sealed {
		why = append(why, "sealed")
	}
	if have.NoAck {
		why = append(why, "no_ack")
	}
	return strings.Join(why, "; ")
}

// covers reports whether the subject pattern takes every subject of subj
// (itself a pattern ending in >).
func covers(pattern, subj string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subj, ".")
	for i, t := range pt {
		switch {
		case t == ">":
			return true
		case i >= len(st):
			return false
		case t == "*" && st[i] != ">":
		case t != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

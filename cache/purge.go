package cache

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Purge selects the cache entries to drop: every field set narrows it (the
// zero Purge selects a chain's every entry). A remote's answers found
// wrong (it was on another chain, it lied, it was cordoned for integrity)
// are dropped by Remote and Since; an operator drops any of them by the
// admin API.
type Purge struct {
	// Method: entries of that method only.
	Method string `json:"method,omitempty"`
	// Remote: entries that remote's answer made (a tier that does not
	// record remotes, Postgres, drops every entry the rest selects).
	Remote string `json:"remote,omitempty"`
	// From and To: entries at blocks in [From, To] (To 0: no end). An
	// entry whose block is not known by number (asked by hash) is
	// selected only by a Purge without a range.
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	// Since: entries written at or after it (zero: whenever).
	Since time.Time `json:"since,omitzero"`
}

// errPurgeRange is a Purge whose range ends before it starts.
var errPurgeRange = errors.New("cache purge: to is below from")

// Validate reports a Purge that selects nothing by mistake.
func (p Purge) Validate() error {
	if p.To != 0 && p.To < p.From {
		return errPurgeRange
	}
	return nil
}

// ranged reports whether p selects by block.
func (p Purge) ranged() bool { return p.From != 0 || p.To != 0 }

// Matches reports whether p selects e.
func (p Purge) Matches(e Entry) bool {
	switch {
	case p.Method != "" && e.Method != p.Method:
		return false
	case p.Remote != "" && !madeBy(e.Remote, p.Remote):
		return false
	case p.ranged() && (e.Block == 0 || e.Block < p.From || p.To != 0 && e.Block > p.To):
		return false
	case !p.Since.IsZero() && e.Written < p.Since.UnixMilli():
		return false
	}
	return true
}

// madeBy reports whether remotes (an entry's: names joined by commas)
// holds name.
func madeBy(remotes, name string) bool {
	for rest := remotes; rest != ""; {
		var have string
		have, rest, _ = strings.Cut(rest, ",")
		if have == name {
			return true
		}
	}
	return false
}

// Purger is a tier that can drop the entries a Purge selects.
type Purger interface {
	Purge(ctx context.Context, p Purge) (n int64, err error)
}

// PurgeFeed is a tier shared by the cluster that tells every replica of a
// purge, so that each drops the entries from its memory tier.
type PurgeFeed interface {
	PublishPurge(ctx context.Context, p Purge) error
	// FollowPurges calls fn with each purge published, until ctx ends.
	FollowPurges(ctx context.Context, fn func(Purge)) error
}

// purgeTimeout bounds a purge of one tier: an operator's action, or the
// drop of a remote's answers, off the calls' path.
const purgeTimeout = time.Minute

// Purge drops the entries p selects from every tier of the cache, then
// tells every replica to drop them from its memory (through a PurgeFeed
// tier). It returns how many entries it dropped; a tier's failure is
// returned after the others were purged.
func (c *Cache) Purge(ctx context.Context, p Purge) (int64, error) {
	n, err := c.purge(ctx, p)
	if p.Validate() == nil {
		c.log.Info("cache purged", "method", p.Method, "remote", p.Remote, "from", p.From, "to", p.To,
			"since", p.Since, "entries", n)
	}
	return n, err
}

// distrustSkew widens a distrust purge back in time: an entry's write time
// is the clock of the replica that stored it, and the last good check the
// clock of the one that checked.
const distrustSkew = time.Second

// PurgeDistrusted drops, on every tier and every replica, the answers
// remote made since its last good check (since): it was found on another
// chain, misbehaving, or cordoned for it (cause). Tiers that do not
// record the remote drop more: Postgres every entry written since, the
// memory tier every entry of the remote whatever its age (and every entry
// whose remote it could not record). It counts the purge and warns, by
// the remote's name. A zero since drops nothing: a remote never checked
// good was never in rotation.
func (c *Cache) PurgeDistrusted(ctx context.Context, remote string, since time.Time, cause string) (int64, error) {
	if remote == "" || since.IsZero() {
		return 0, nil
	}
	n, err := c.purge(ctx, Purge{Remote: remote, Since: since.Add(-distrustSkew)})
	c.m.distrusted.WithLabelValues(c.chain, remote, cause).Inc() // once it is done: a test waits for it
	c.log.Warn("cache dropped the answers of a distrusted remote since its last good check",
		"remote", remote, "cause", cause, "since", since, "entries", n, "err", err)
	return n, err
}

// purge is Purge without its log line.
func (c *Cache) purge(ctx context.Context, p Purge) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var n int64
	var errs []error
	for _, l := range c.tiers {
		pg, ok := l.Tier.(Purger)
		if !ok {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, purgeTimeout)
		d, err := pg.Purge(pctx, p)
		cancel()
		n += d
		if d > 0 {
			l.evictions.WithLabelValues("purge").Add(float64(d))
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range c.tiers {
		if f, ok := l.Tier.(PurgeFeed); ok {
			if err := f.PublishPurge(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

// FollowPurges drops from the memory tier, until ctx ends, the entries of
// each purge another replica publishes (Purge): the shared tiers are
// purged by the replica that purged. Without a PurgeFeed tier it returns
// at once.
func (c *Cache) FollowPurges(ctx context.Context) {
	for _, l := range c.tiers {
		f, ok := l.Tier.(PurgeFeed)
		if !ok {
			continue
		}
		for ctx.Err() == nil {
			err := f.FollowPurges(ctx, func(p Purge) {
				if d, _ := c.memory.Purge(ctx, p); d > 0 {
					c.tiers[0].evictions.WithLabelValues("purge").Add(float64(d))
				}
			})
			if err != nil && ctx.Err() == nil {
				c.log.Warn("cache purge feed lost; following again", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}
		return
	}
}

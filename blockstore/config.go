package blockstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is the history store as the configuration file's postgres
// section writes it, and that section's YAML schema. URL may carry a
// password: no message prints it.
type Config struct {
	URL string `yaml:"url"` // postgres://user[:password]@host:5432/db?sslmode=disable; "" no history
	// ReadTimeout bounds one history read (connection included): a read
	// Postgres does not answer in time fails, the call goes on to the
	// remotes, and the store counts as down until a ping answers.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one write (a batch of archived blocks).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// Required makes the process unready while the store is not up
	// (History.Readiness). By default it is optional: the replicas share
	// it, so an outage would take every replica out at once while the
	// remotes could serve.
	Required bool `yaml:"required"`
}

// WithDefaults returns c with its zero timeouts at their defaults; without
// a URL there is no store and nothing to default. callDeadline is the
// shortest deadline of a call the store is read for (0: none): the read
// timeout fits inside it twice, as a remote's timeout does, so the
// remotes keep time to answer. It is the only place the store's defaults
// are decided.
func (c Config) WithDefaults(callDeadline time.Duration) Config {
	if c.URL == "" {
		return c
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
		if callDeadline > 0 {
			c.ReadTimeout = min(c.ReadTimeout, callDeadline/2)
		}
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Validate reports every problem of a defaulted c, each naming its field
// (url, read_timeout). The URL is never quoted.
func (c Config) Validate() error {
	if c.URL == "" {
		return nil
	}
	var errs []error
	// Only the shape: pgx's own parse reads certificate and password
	// files, which a config check must not (they are often mounted only
	// where venn runs); Open reports the rest at start.
	// A URL without a host is fine: ?host=/run/postgresql is a socket.
	if u, err := url.Parse(c.URL); err != nil ||
		(!strings.EqualFold(u.Scheme, "postgres") && !strings.EqualFold(u.Scheme, "postgresql")) {
		errs = append(errs, errors.New("url: must be postgres://user[:password]@host:port/db"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", d.name))
		}
	}
	return errors.Join(errs...)
}

// Open returns a store on the database c names, bounded by c's timeouts
// (see Open); opts gives the rest.
func (c Config) Open(ctx context.Context, opts Options) (*Postgres, error) {
	opts.ReadTimeout, opts.WriteTimeout = c.ReadTimeout, c.WriteTimeout
	return Open(ctx, c.URL, opts)
}

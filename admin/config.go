package admin

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Defaults of the admin section.
const (
	DefaultCordonResync = time.Second
	DefaultHeartbeat    = 5 * time.Second
	// minTokenLen keeps a token out of reach of guessing.
	minTokenLen = 16
)

// DefaultChartStep is admin.chart_step's default: 90 steps of 10 s, the
// last 15 minutes.
const DefaultChartStep = 10 * time.Second

// Config is the admin API's section of the config file (admin:). Where it
// is served is the process's admin_listen, or the metrics listener with
// OnMetricsListen.
type Config struct {
	// Tokens may call the API, each as "Authorization: Bearer TOKEN";
	// actions are logged with the token's name. Without tokens the API
	// serves only on a loopback address, reads and actions alike.
	Tokens []Token `yaml:"tokens"`
	// OnMetricsListen serves the API on metrics_listen, under /admin/,
	// instead of admin_listen.
	OnMetricsListen bool `yaml:"on_metrics_listen"`
	// CordonResync is how often every replica re-reads the manual cordons
	// from Redis, besides being told of each change: a missed message heals
	// within it, and an expiry takes effect within it.
	CordonResync time.Duration `yaml:"cordon_resync"`
	// Heartbeat is how often this replica writes its heartbeat to Redis.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// ChartStep is the step of the status page's charts, which keep 90
	// of them in memory: 10 s, the last 15 minutes.
	ChartStep time.Duration `yaml:"chart_step"`
}

// Token is one named bearer token (its value from ${ENV}, never the file).
type Token struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token"`
}

// WithDefaults returns c with its zero fields at their defaults.
func (c Config) WithDefaults() Config {
	if c.CordonResync <= 0 {
		c.CordonResync = DefaultCordonResync
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.ChartStep <= 0 {
		c.ChartStep = DefaultChartStep
	}
	return c
}

// Validate checks the section; field paths are relative to it. Messages
// never quote a token. Where the API listens is the app's to check
// (Loopback).
func (c Config) Validate() error {
	var errs []error
	seen := map[string]int{}
	for i, t := range c.Tokens {
		path := fmt.Sprintf("tokens[%d]", i)
		switch first, dup := seen[t.Name]; {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: required (actions are logged with it)", path))
		case dup:
			errs = append(errs, fmt.Errorf("%s.name: %q is already used by tokens[%d]", path, t.Name, first))
		default:
			seen[t.Name] = i
		}
		if len(t.Token) < minTokenLen {
			errs = append(errs, fmt.Errorf("%s.token: must be at least %d characters (use ${ENV})", path, minTokenLen))
		}
	}
	if c.CordonResync < 0 {
		errs = append(errs, errors.New("cordon_resync: must not be negative"))
	}
	if c.Heartbeat < 0 {
		errs = append(errs, errors.New("heartbeat: must not be negative"))
	}
	if c.ChartStep < 0 {
		errs = append(errs, errors.New("chart_step: must not be negative"))
	}
	return errors.Join(errs...)
}

// Loopback reports whether addr (host:port) binds only to loopback.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

package app

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/router"
)

var (
	chainNameRE  = regexp.MustCompile(`^[a-z0-9_-]+$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") // the edge's
)

// Validate reports every problem of an already defaulted config, each
// naming its field path (chains[0].remotes[1].url). Messages never include
// a URL or header value: those carry API keys.
func (c *Config) Validate() error {
	var p problems
	checkAddr(&p, "listen", c.Listen, true)
	if c.MetricsListen != nil && *c.MetricsListen != "" {
		checkAddr(&p, "metrics_listen", *c.MetricsListen, false)
		if *c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
			p.add("metrics_listen", "must differ from listen")
		}
	}
	// Parse has checked what it decoded; a Config built in code has not.
	if err := new(LogLevel).UnmarshalText([]byte(c.Log.Level)); err != nil {
		p.add("log.level", "%v", err)
	}
	if err := new(LogFormat).UnmarshalText([]byte(c.Log.Format)); err != nil {
		p.add("log.format", "%v", err)
	}
	if c.ShutdownTimeout < 0 {
		p.add("shutdown_timeout", "must be positive")
	}
	if c.ShutdownDelay < 0 {
		p.add("shutdown_delay", "must not be negative")
	}
	p.under("tracing", c.Tracing.Validate())
	p.under("nats", c.NATS.Validate())
	if c.GRPCListen != "" {
		checkAddr(&p, "grpc_listen", c.GRPCListen, false)
		if c.GRPCListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
			p.add("grpc_listen", "must differ from listen")
		}
	}
	if err := c.GRPC.Validate(); err != nil {
		p = append(p, err)
	}
	validateLimits(&p, c.Limits)
	p.under("request_log", c.RequestLog.Validate())
	p.under("compression", c.Compression.Validate())
	c.validateEdge(&p)
	if err := c.Usage.Validate(); err != nil {
		p = append(p, err)
	}
	c.validateCrossing(&p)
	r := c.Redis
	if _, err := r.target(); err != nil && (r.Enabled() || r.Username != "" || r.Password != "" || r.TLS || r.Sentinel.Password != "") {
		p = append(p, err)
	}
	if c.Redis.Enabled() {
		if c.Redis.LeaseTTL < 300*time.Millisecond {
			p.add("redis.lease_ttl", "must be at least 300ms")
		}
	}
	c.validatePostgres(&p)
	c.validateAdmin(&p)

	if len(c.Chains) == 0 {
		p.add("chains", "at least one chain is required")
	}
	c.validateChainIDs(&p)
	seen := make(map[string]int, len(c.Chains))
	for i := range c.Chains {
		ch := &c.Chains[i]
		path := fmt.Sprintf("chains[%d]", i)
		if first, dup := seen[ch.Name]; dup && ch.Name != "" {
			p.add(path+".name", "%q is already used by chains[%d]", ch.Name, first)
		} else {
			seen[ch.Name] = i
		}
		validateChain(&p, path, ch)
		c.validateFeed(&p, path, i)
		c.validateCache(&p, path, ch.Cache)
		for j, r := range ch.Remotes {
			// No larger reply could ever be read.
			if budget := c.Limits.MaxReplyBytesInFlight; budget > 0 && r.MaxResponseBytes > budget {
				p.add(fmt.Sprintf("%s.remotes[%d].max_response_bytes", path, j),
					"must not exceed limits.max_reply_bytes_in_flight (%d)", budget)
			}
		}
	}
	return errors.Join(p...)
}

// validatePostgres checks the history store's section, and that its
// reads leave every chain's call time for the remotes.
func (c *Config) validatePostgres(p *problems) {
	if c.Postgres.URL == "" {
		return
	}
	p.under("postgres", c.Postgres.Validate())
	for i, ch := range c.Chains {
		if ch.Pool.CallDeadline > 0 && c.Postgres.ReadTimeout >= ch.Pool.CallDeadline {
			// History is read before the remotes are asked: a read as
			// long as the call would leave them nothing.
			p.add("postgres.read_timeout", "must be shorter than chains[%d].call_deadline (%v)", i, ch.Pool.CallDeadline)
		}
	}
}

// validateChainIDs rejects chains that share a chain_id but keep its
// history differently. Two names for one chain (say, one per set of
// remotes) are allowed: the history store is the chain's, keyed by
// chain_id, and both archive into it. But its partitions and retention
// are keyed so too: with different keep_blocks or partition_blocks each
// chain's leader would drop, or split, the history the other keeps.
func (c *Config) validateChainIDs(p *problems) {
	if c.Postgres.URL == "" {
		return
	}
	first := make(map[uint64]int, len(c.Chains))
	for i, ch := range c.Chains {
		if ch.History.Off || ch.ChainID == 0 {
			continue
		}
		j, dup := first[ch.ChainID]
		if !dup {
			first[ch.ChainID] = i
			continue
		}
		if !samePolicy(ch.History.Policy(), c.Chains[j].History.Policy()) {
			p.add(fmt.Sprintf("chains[%d].history", i),
				"chain_id %d is also chains[%d]'s, whose history keep_blocks or partition_blocks differ: chains sharing a chain_id share its history and must keep it alike (or set history.off on one)",
				ch.ChainID, j)
		}
	}
}

// samePolicy reports whether a and b keep a chain's history alike, a
// zero partition size standing for the store's default.
func samePolicy(a, b blockstore.Policy) bool {
	span := func(n uint64) uint64 {
		if n == 0 {
			return blockstore.DefaultPartitionBlocks
		}
		return n
	}
	return a.KeepBlocks == b.KeepBlocks && span(a.PartitionBlocks) == span(b.PartitionBlocks)
}

// validateCache checks a chain's cache section, and that the tiers it
// turns on have their stores.
func (c *Config) validateCache(p *problems, path string, cc cache.Config) {
	p.under(path+".cache", cc.Validate())
	if cc.Redis != nil && *cc.Redis && !c.Redis.Enabled() {
		p.add(path+".cache.redis", "requires redis.url, redis.sentinel or redis.cluster")
	}
	if cc.Postgres && c.Postgres.URL == "" {
		p.add(path+".cache.postgres", "requires postgres.url")
	}
}

func checkAddr(p *problems, path, addr string, required bool) {
	if addr == "" {
		if required {
			p.add(path, "required")
		}
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.add(path, "must be host:port, not %q", addr)
	}
}

func validateLimits(p *problems, l Limits) { p.under("limits", l.Validate()) }

// validate checks a chain: its name and id here, its head and history
// settings in package stalker, its pool and remotes in package remotes.
func validateChain(p *problems, path string, c *ChainConfig) {
	if !chainNameRE.MatchString(c.Name) {
		p.add(path+".name", "must match [a-z0-9_-]+, not %q", c.Name)
	}
	if c.ChainID == 0 {
		p.add(path+".chain_id", "required, must be > 0")
	}
	p.under(path+".head", c.Head.Validate())
	p.under(path+".history", c.History.Validate(c.Head.Window))
	p.under(path, c.Pool.Validate(c.Remotes))
	p.under(path+".getlogs_limits", c.GetLogsLimits.Validate())
	p.under(path, router.ValidateStatic(c.StaticAnswers))
	p.under(path+".filters", c.Filters.Validate())
	p.under(path+".nats", c.NATS.Validate())
}

// validateAdmin checks where the admin API serves: without tokens only on
// loopback, since it cordons remotes and drains the replica.
func (c *Config) validateAdmin(p *problems) {
	p.under("admin", c.Admin.Validate())
	if c.AdminListen != "" {
		checkAddr(p, "admin_listen", c.AdminListen, false)
		if (c.AdminListen == c.Listen || c.AdminListen == c.MetricsAddr()) && !strings.HasSuffix(c.AdminListen, ":0") {
			p.add("admin_listen", "must differ from listen and metrics_listen (admin.on_metrics_listen serves it on metrics_listen)")
		}
	}
	if c.Admin.OnMetricsListen {
		switch {
		case c.AdminListen != "":
			p.add("admin.on_metrics_listen", "admin_listen is set too: serve the admin API on one of them")
		case c.MetricsAddr() == "":
			p.add("admin.on_metrics_listen", "metrics_listen is off")
		}
	}
	if addr, field := c.AdminAddr(); addr != "" && len(c.Admin.Tokens) == 0 && !admin.Loopback(addr) {
		p.add(field, "the admin API without admin.tokens binds only to a loopback address (127.0.0.1, [::1] or localhost); add a token to serve it on %s", addr)
	}
}

// validateEdge checks the edge's sections and tls. Key values are never
// quoted.
func (c *Config) validateEdge(p *problems) {
	chains := make([]string, len(c.Chains))
	for i, ch := range c.Chains {
		chains[i] = ch.Name
	}
	*p = append(*p, unwrapJoined(c.Edge.Validate(chains))...)
	switch t := c.TLS; {
	case t.CertFile == "" && t.KeyFile != "":
		p.add("tls.cert_file", "required with tls.key_file")
	case t.CertFile != "" && t.KeyFile == "":
		p.add("tls.key_file", "required with tls.cert_file")
	case t.CertFile == "" && t.ClientCAFile != "":
		p.add("tls.client_ca_file", "needs tls.cert_file and tls.key_file: client certificates are checked over TLS")
	}
	if c.Edge.Auth.Redis.Enabled && !c.Redis.Enabled() {
		p.add("auth.redis.enabled", "requires redis.url, redis.sentinel or redis.cluster: the tenants and keys are kept there")
	}
}

// validateFeed checks a chain's JetStream feed against the nats section
// and the other chains' feeds.
func (c *Config) validateFeed(p *problems, path string, i int) {
	f := c.Chains[i].NATS
	if !f.Stream {
		return
	}
	if !c.NATS.Enabled() {
		p.add(path+".nats.stream", "needs nats.url: the feed is published on the process's NATS connection")
	}
	name := f.WithDefaults(c.Chains[i].Name).Name
	for j := range i {
		if o := c.Chains[j].NATS; o.Stream && o.WithDefaults(c.Chains[j].Name).Name == name {
			p.add(path+".nats.stream_name", "stream %s is also chains[%d]'s", name, j)
		}
	}
}

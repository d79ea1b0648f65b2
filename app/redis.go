package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The three Redis deployments redis.url, redis.sentinel and redis.cluster
// name. Every one is a redis.UniversalClient to the rest of venn: each
// chain's keys share one hash tag (package keyspace), so what works on one
// server works on a cluster's slot.
const (
	redisServer   = "server"
	redisSentinel = "sentinel"
	redisCluster  = "cluster"
)

// Enabled reports whether a Redis is configured: the process joins a
// cluster of replicas.
func (c RedisConfig) Enabled() bool {
	return c.URL != "" || len(c.Cluster) > 0 || c.Sentinel.Master != "" || len(c.Sentinel.Addrs) > 0
}

// redisTarget is a parsed RedisConfig: the deployment and how to reach it.
type redisTarget struct {
	kind   string
	server *redis.Options // redisServer: go-redis's parse, keeping the URL's options
	addrs  []string       // the sentinels, or the cluster's seed nodes
	master string
	db     int
	// username and password are the data servers'; sentinelPassword the
	// sentinels', which often have none.
	username, password, sentinelPassword string
	tls                                  bool
}

// target parses c. Its errors never quote the URL: it may hold a password.
func (c RedisConfig) target() (redisTarget, error) {
	block := c.Sentinel.Master != "" || len(c.Sentinel.Addrs) > 0
	switch {
	case block && len(c.Cluster) > 0:
		return redisTarget{}, errors.New("redis.sentinel and redis.cluster: set one")
	case c.URL != "" && (block || len(c.Cluster) > 0):
		return redisTarget{}, errors.New("redis.url: set it or redis.sentinel or redis.cluster, not both")
	case c.Sentinel.Password != "" && !block:
		return redisTarget{}, errors.New("redis.sentinel.password: only with redis.sentinel.master and addrs")
	case block:
		if c.Sentinel.Master == "" {
			return redisTarget{}, errors.New("redis.sentinel.master: required")
		}
		if err := checkAddrs("redis.sentinel.addrs", c.Sentinel.Addrs); err != nil {
			return redisTarget{}, err
		}
		return redisTarget{kind: redisSentinel, addrs: c.Sentinel.Addrs, master: c.Sentinel.Master,
			username: c.Username, password: c.Password, sentinelPassword: c.Sentinel.Password, tls: c.TLS}, nil
	case len(c.Cluster) > 0:
		if err := checkAddrs("redis.cluster", c.Cluster); err != nil {
			return redisTarget{}, err
		}
		return redisTarget{kind: redisCluster, addrs: c.Cluster, username: c.Username, password: c.Password, tls: c.TLS}, nil
	case c.Username != "" || c.Password != "":
		return redisTarget{}, errors.New("redis.username, redis.password: only with redis.sentinel or redis.cluster (a URL carries its own)")
	case c.TLS:
		return redisTarget{}, errors.New("redis.tls: only with redis.sentinel or redis.cluster (a URL says rediss://)")
	}
	return parseRedisURL(c.URL)
}

// parseRedisURL reads the three URL forms. The sentinel and cluster forms
// take a comma-separated host list; they accept no query option but
// master= and sentinel_password=, so that a typo is an error, not ignored.
func parseRedisURL(raw string) (redisTarget, error) {
	const form = "must be redis://[:password@]host:port[/db], redis+sentinel://[:password@]host:port[,host:port...][/db]?master=NAME " +
		"or redis+cluster://[:password@]host:port[,host:port...] (rediss for TLS)"
	u, err := url.Parse(raw)
	if err != nil {
		return redisTarget{}, errors.New("redis.url: " + form) // url's error quotes the URL
	}
	scheme, kind, _ := strings.Cut(u.Scheme, "+")
	if scheme != "redis" && scheme != "rediss" {
		return redisTarget{}, errors.New("redis.url: " + form)
	}
	switch kind {
	case "":
		opts, err := redis.ParseURL(raw)
		if err != nil {
			// go-redis's message can quote the URL, password included.
			return redisTarget{}, errors.New("redis.url: " + form)
		}
		return redisTarget{kind: redisServer, server: opts}, nil
	case redisSentinel, redisCluster:
	default:
		return redisTarget{}, errors.New("redis.url: " + form)
	}
	t := redisTarget{kind: kind, tls: scheme == "rediss", username: u.User.Username()}
	t.password, _ = u.User.Password()
	t.addrs = strings.Split(u.Host, ",")
	if err := checkAddrs("redis.url", t.addrs); err != nil {
		return redisTarget{}, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if t.db, err = strconv.Atoi(p); err != nil || t.db < 0 {
			return redisTarget{}, errors.New("redis.url: the path must be a database number")
		}
		if kind == redisCluster && t.db != 0 {
			return redisTarget{}, errors.New("redis.url: a Redis Cluster has only database 0")
		}
	}
	q := u.Query()
	t.master = q.Get("master")
	t.sentinelPassword = q.Get("sentinel_password")
	q.Del("master")
	q.Del("sentinel_password")
	for k := range q {
		return redisTarget{}, fmt.Errorf("redis.url: unknown option %q", k)
	}
	switch {
	case kind == redisSentinel && t.master == "":
		return redisTarget{}, errors.New("redis.url: a redis+sentinel URL needs ?master=NAME")
	case kind == redisCluster && (t.master != "" || t.sentinelPassword != ""):
		return redisTarget{}, errors.New("redis.url: master and sentinel_password are for redis+sentinel")
	}
	return t, nil
}

func checkAddrs(field string, addrs []string) error {
	if len(addrs) == 0 {
		return errors.New(field + ": at least one host:port is required")
	}
	for i, a := range addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return fmt.Errorf("%s: address %d is not host:port", field, i+1)
		}
	}
	return nil
}

// redisClusterReload is how often a Redis Cluster client reads the slots'
// masters while it is in use.
const redisClusterReload = time.Second

// redisTuning is what one of venn's clients needs on top of the
// deployment: the head feed's takes go-redis's retries; the rate
// limiter's fails at once (edge.go).
type redisTuning struct {
	maxRetries    int // 0: go-redis's default; -1: none
	dialerRetries int // 0: go-redis's default
}

// newRedisClient connects nothing: go-redis dials on the first command.
// Every call is bounded by its context: a leader's renew must not outlive
// its lease waiting on a dead connection.
func (c RedisConfig) newRedisClient(tune redisTuning) (redis.UniversalClient, error) {
	t, err := c.target()
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if t.tls {
		// No ServerName: each node is verified under its own address.
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch t.kind {
	case redisSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: t.master, SentinelAddrs: t.addrs, SentinelPassword: t.sentinelPassword,
			Username: t.username, Password: t.password, DB: t.db, TLSConfig: tlsConfig,
			ContextTimeoutEnabled: true, MaxRetries: tune.maxRetries, DialerRetries: tune.dialerRetries,
		}), nil
	case redisCluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: t.addrs, Username: t.username, Password: t.password, TLSConfig: tlsConfig,
			ContextTimeoutEnabled: true, MaxRetries: tune.maxRetries, DialerRetries: tune.dialerRetries,
			// go-redis learns the slots again on a MOVED, but not when a
			// master is gone: its slots' calls keep dialling it until the
			// next reload (60s by default). One CLUSTER SLOTS a second
			// finds the promoted replica about as soon as the cluster has.
			ClusterStateReloadInterval: redisClusterReload,
		}), nil
	}
	opts := t.server
	opts.ContextTimeoutEnabled = true
	if tune.maxRetries != 0 {
		opts.MaxRetries = tune.maxRetries
	}
	if tune.dialerRetries != 0 {
		opts.DialerRetries = tune.dialerRetries
	}
	return redis.NewClient(opts), nil
}

// replicaID names this replica: redis.replica_id, defaulted with Redis;
// without it, as that default would be. The one name of this process in
// its logs, its leases (the in-memory elector's too), the admin API and
// venn_replica_info.
func (c *Config) replicaID() string {
	if c.Redis.ReplicaID != "" {
		return c.Redis.ReplicaID
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

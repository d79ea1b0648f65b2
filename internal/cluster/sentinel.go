package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/venn-gateway/venn/internal/freeport"
)

// SentinelMaster is the name the sentinels of a RedisSentinel watch.
const SentinelMaster = "venn"

// RedisSentinel is a private Sentinel set: a master, its replica, and
// sentinels watching them (quorum 1, so one sentinel decides), every
// process saving nothing. Close stops them all.
type RedisSentinel struct {
	Data      []*Redis // the master and the replica, in either role
	Sentinels []*Proc
	addrs     []string // the sentinels' host:port
	client    *redis.SentinelClient
}

// StartRedisSentinel starts a master, a replica of it and n sentinels
// with their files in dir, and returns once the replica has synced and
// the sentinels know it.
func StartRedisSentinel(ctx context.Context, dir string, n int) (*RedisSentinel, error) {
	s := &RedisSentinel{}
	master, err := startRedis(ctx, dir, 0)
	if err != nil {
		return nil, err
	}
	s.Data = append(s.Data, master)
	_, mport, _ := strings.Cut(master.Addr(), ":")
	replica, err := startRedis(ctx, dir, 0, "--replicaof", "127.0.0.1", mport)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Data = append(s.Data, replica)
	for range n {
		addr, proc, err := startSentinel(ctx, dir, mport)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, proc)
		s.addrs = append(s.addrs, addr)
	}
	s.client = redis.NewSentinelClient(&redis.Options{Addr: s.addrs[0]})
	cctx, cancel := context.WithTimeout(ctx, ClusterReadyTimeout)
	defer cancel()
	err = poll(cctx, func() error {
		if err := replicaSynced(cctx, replica); err != nil {
			return err
		}
		for _, a := range s.addrs {
			sc := redis.NewSentinelClient(&redis.Options{Addr: a})
			rs, err := sc.Replicas(cctx, SentinelMaster).Result()
			_ = sc.Close()
			if err != nil {
				return err
			}
			if len(rs) == 0 {
				return fmt.Errorf("sentinel %s knows no replica yet", a)
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("redis sentinel not ready: %w", err)
	}
	return s, nil
}

// startSentinel starts a sentinel watching the master on mport, on a
// free port, and returns once it answers PING.
func startSentinel(ctx context.Context, dir, mport string) (string, *Proc, error) {
	var lastErr error
	for range startAttempts {
		p, err := freeport.Port()
		if err != nil {
			return "", nil, err
		}
		conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(p)+".conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %s 1\nsentinel down-after-milliseconds %[3]s 1000\n"+
			"sentinel failover-timeout %[3]s 10000\n", p, dir, SentinelMaster, mport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return "", nil, err
		}
		proc, err := Start("redis-sentinel", nil, nil, "redis-server", conf, "--sentinel", "--loglevel", "warning")
		if err != nil {
			return "", nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		pctx, cancel := context.WithTimeout(ctx, RedisReadyTimeout)
		lastErr = poll(pctx, func() error {
			if done, werr := proc.Exited(); done {
				return fmt.Errorf("redis-sentinel exited: %v%s", werr, proc.StderrNote())
			}
			return rdb.Ping(pctx).Err()
		})
		cancel()
		_ = rdb.Close()
		if lastErr == nil {
			return addr, proc, nil
		}
		proc.Kill()
	}
	return "", nil, fmt.Errorf("start redis-sentinel: %w", lastErr)
}

// Addrs are the sentinels' host:port.
func (s *RedisSentinel) Addrs() []string { return s.addrs }

// MasterAddr is the master's host:port as the first sentinel tells it.
func (s *RedisSentinel) MasterAddr(ctx context.Context) (string, error) {
	a, err := s.client.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(a) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name: %v", a)
	}
	return a[0] + ":" + a[1], nil
}

// Master is the data server that is master now, as the sentinel tells.
func (s *RedisSentinel) Master(ctx context.Context) (*Redis, error) {
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range s.Data {
		if r.Addr() == addr {
			return r, nil
		}
	}
	return nil, fmt.Errorf("master %s is not one of the set's", addr)
}

// Failover runs SENTINEL FAILOVER and returns once the sentinel names the
// other server master and that server says it is; the old master syncs
// as its replica after that.
func (s *RedisSentinel) Failover(ctx context.Context) (*Redis, error) {
	old, err := s.Master(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.client.Failover(ctx, SentinelMaster).Err(); err != nil {
		return nil, fmt.Errorf("sentinel failover: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, ClusterReadyTimeout)
	defer cancel()
	var now *Redis
	err = poll(ctx, func() error {
		if now, err = s.Master(ctx); err != nil {
			return err
		}
		if now == old {
			return fmt.Errorf("the sentinel still names %s", old.Addr())
		}
		repl, err := now.Client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(repl, "role:master") {
			return fmt.Errorf("%s is not master yet", now.Addr())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	return now, nil
}

// replicaSynced is nil once r is a replica with its master's data.
func replicaSynced(ctx context.Context, r *Redis) error {
	repl, err := r.Client.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(repl, "role:slave") || !strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("%s: not a synced replica", r.Addr())
	}
	return nil
}

// Close stops the sentinels and the data servers.
func (s *RedisSentinel) Close() {
	if s.client != nil {
		_ = s.client.Close()
	}
	for _, p := range s.Sentinels {
		p.Kill()
	}
	for _, r := range s.Data {
		r.Close()
	}
}

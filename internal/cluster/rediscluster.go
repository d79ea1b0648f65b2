package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterReadyTimeout covers a Redis Cluster's creation and a failover:
// nodes agreeing on the slots, replicas synced, a replica promoted.
const ClusterReadyTimeout = 30 * time.Second

// clusterNodeTimeout is how long the nodes take a silent master for
// alive: short, so a killed master's replica takes over within seconds.
const clusterNodeTimeout = "1000"

// RedisCluster is a private Redis Cluster of masters, each with its
// replicas, every node a Redis of its own (saving nothing). Close stops
// them all.
type RedisCluster struct {
	Nodes  []*Redis
	Client *redis.ClusterClient
}

// StartRedisCluster starts masters*(1+replicas) nodes with their files in
// dir, joins them with redis-cli --cluster create, and returns once every
// node says the cluster is ok and every replica has synced its master.
func StartRedisCluster(ctx context.Context, dir string, masters, replicas int) (*RedisCluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, fmt.Errorf("redis-cli not found (Debian's redis-tools package has it): %w", err)
	}
	n := masters * (1 + replicas)
	c := &RedisCluster{}
	addrs := make([]string, 0, n)
	for i := range n {
		// A directory each: a node keeps its view of the cluster in
		// nodes.conf.
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.Mkdir(nodeDir, 0o700); err != nil {
			c.Close()
			return nil, err
		}
		r, err := startRedis(ctx, nodeDir, 0, "--cluster-enabled", "yes", "--cluster-node-timeout", clusterNodeTimeout)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, r)
		addrs = append(addrs, r.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, ClusterReadyTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	if err := poll(cctx, func() error { return clusterReady(cctx, c.Nodes) }); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis cluster not ready: %w", err)
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	return c, nil
}

// Addrs are the nodes' host:port, live or not.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, r := range c.Nodes {
		out[i] = r.Addr()
	}
	return out
}

// clusterReady is nil once every one of live says cluster_state:ok and,
// if a replica, has its master's data.
func clusterReady(ctx context.Context, live []*Redis) error {
	for _, r := range live {
		info, err := r.Client.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", r.Addr())
		}
		repl, err := r.Client.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not synced", r.Addr())
		}
	}
	return nil
}

// MasterOf is the node serving key's slot now, as the nodes tell.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (*Redis, error) {
	m, err := c.Client.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	for _, r := range c.Nodes {
		if r.Addr() == m.Options().Addr {
			return r, nil
		}
	}
	return nil, fmt.Errorf("key %s: master %s is not one of the cluster's", key, m.Options().Addr)
}

// Slot is key's hash slot, as the cluster computes it (CLUSTER KEYSLOT).
func (c *RedisCluster) Slot(ctx context.Context, key string) (int64, error) {
	return c.Client.ClusterKeySlot(ctx, key).Result()
}

// KillMaster kills the master serving key's slot and returns once one of
// its replicas serves the slot, every live node says the cluster is ok,
// and the client has learnt the new layout.
func (c *RedisCluster) KillMaster(ctx context.Context, key string) (*Redis, error) {
	old, err := c.MasterOf(ctx, key)
	if err != nil {
		return nil, err
	}
	slot, err := c.Slot(ctx, key)
	if err != nil {
		return nil, err
	}
	old.Kill()
	var live []*Redis
	for _, r := range c.Nodes {
		if r.Proc != nil {
			live = append(live, r)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, ClusterReadyTimeout)
	defer cancel()
	err = poll(ctx, func() error {
		owner, err := slotOwner(ctx, live[0], slot)
		if err != nil {
			return err
		}
		if owner == old.Addr() {
			return fmt.Errorf("slot %d still on %s", slot, owner)
		}
		return clusterReady(ctx, live)
	})
	if err != nil {
		return nil, fmt.Errorf("no failover of %s: %w", old.Addr(), err)
	}
	c.Client.ReloadState(ctx)
	return old, nil
}

// slotOwner is the master r says serves slot.
func slotOwner(ctx context.Context, r *Redis, slot int64) (string, error) {
	slots, err := r.Client.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", errors.New("slot not served")
}

// Close stops every node and closes the clients.
func (c *RedisCluster) Close() {
	if c.Client != nil {
		_ = c.Client.Close()
	}
	for _, r := range c.Nodes {
		r.Close()
	}
}

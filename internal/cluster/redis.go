package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/stalker"
)

// Redis start limits.
const (
	// RedisReadyTimeout covers redis-server's start.
	RedisReadyTimeout = 10 * time.Second
	redisPoll         = 20 * time.Millisecond
	// startAttempts: a free port may be taken before the server binds it.
	startAttempts = 3
)

// Redis is a private redis-server: it saves nothing, so killed and started
// again it comes back empty, as a Redis that lost its data does. Kill and
// Start are for one goroutine, the test's or the bench's.
type Redis struct {
	// Client is connected to the server, across restarts.
	Client *redis.Client
	// Proc is the running server; nil after Kill.
	Proc *Proc
	port int
	dir  string
	args []string // more of redis-server's arguments: a cluster node's
}

// StartRedis starts redis-server on port (0: a free one) with its files in
// dir, and returns once it answers PING.
func StartRedis(ctx context.Context, dir string, port int) (*Redis, error) {
	return startRedis(ctx, dir, port)
}

// startRedis is StartRedis with more arguments for redis-server.
func startRedis(ctx context.Context, dir string, port int, args ...string) (*Redis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found (Debian's redis-server package has it): %w", err)
	}
	var lastErr error
	for range startAttempts {
		p := port
		if p == 0 {
			var err error
			if p, err = freeport.Port(); err != nil {
				return nil, err
			}
		}
		r := &Redis{port: p, dir: dir, args: args}
		r.Client = redis.NewClient(&redis.Options{Addr: r.Addr()})
		if lastErr = r.Start(ctx); lastErr == nil {
			return r, nil
		}
		r.Close()
		if ctx.Err() != nil || port != 0 {
			break
		}
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Start starts the server, again after Kill, on its port, and returns once
// it answers PING.
func (r *Redis) Start(ctx context.Context) error {
	args := append([]string{"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir, "--loglevel", "warning"}, r.args...)
	p, err := Start("redis-server", nil, nil, "redis-server", args...)
	if err != nil {
		return err
	}
	r.Proc = p
	if err := r.waitPing(ctx); err != nil {
		r.Kill()
		return err
	}
	return nil
}

// waitPing polls PING until it answers, the server exits, or
// RedisReadyTimeout passes.
func (r *Redis) waitPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RedisReadyTimeout)
	defer cancel()
	for {
		err := r.Client.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if done, werr := r.Proc.Exited(); done {
			return fmt.Errorf("redis-server exited: %v%s", werr, r.Proc.StderrNote())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis-server not ready: %w", err)
		case <-time.After(redisPoll):
		}
	}
}

// Kill ends the server at once (SIGKILL) and waits for it.
func (r *Redis) Kill() {
	r.Proc.Kill()
	r.Proc = nil
}

// Close ends the server and closes the client.
func (r *Redis) Close() {
	r.Kill()
	_ = r.Client.Close()
}

// Leader reads chain's leader lease (stalker.ReadLeader): the replica
// holding it and its fencing epoch; "" when nobody holds it.
func (r *Redis) Leader(ctx context.Context, chain string) (string, uint64, error) {
	l, ok, err := stalker.ReadLeader(ctx, r.Client, chain)
	if err != nil || !ok {
		return "", 0, err
	}
	return l.Replica, l.Epoch, nil
}

// poll calls check every redisPoll until it returns nil or ctx ends.
func poll(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(redisPoll):
		}
	}
}

package testkit

import (
	"context"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServerReady bounds a private redis-server's start.
const redisServerReady = 10 * time.Second

// RedisServer is a private redis-server on a free loopback port, for a test
// that takes Redis away: it saves nothing, so stopped and started again it
// comes back empty, as a Redis without persistence does after a crash. It
// is stopped when the test ends. Stop and Start are for the test's
// goroutine.
type RedisServer struct {
	t    testing.TB
	Addr string
	dir  string
	cmd  *exec.Cmd
}

// StartRedisServer starts one and returns once it answers PING.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: install Debian's redis-server package (scripts/test.sh does)")
	}
	r := &RedisServer{t: t, Addr: ClosedAddr(t), dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start starts the server again after Stop, empty, on its port.
func (r *RedisServer) Start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.Addr)
	r.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--loglevel", "warning")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), redisServerReady)
	defer cancel()
	if !Poll(redisServerReady, func() bool { return rdb.Ping(ctx).Err() == nil }) {
		r.Stop()
		r.t.Fatalf("redis-server on %s did not answer PING within %v", r.Addr, redisServerReady)
	}
}

// Stop kills the server and waits for it; stopping a stopped one does
// nothing.
func (r *RedisServer) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

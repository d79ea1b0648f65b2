// Package natstest starts a real nats-server, with JetStream, for tests:
// a private process on a free 127.0.0.1 port with its own storage
// folder, stopped when the test ends. Stop or Kill and then Restart bring
// it back on the same port with the same storage, for the tests of a
// NATS restart.
//
// The binary is $VENN_NATS_SERVER, else nats-server on the PATH, else
// Debian's /usr/sbin/nats-server (scripts/test.sh installs it). A missing
// binary fails the test rather than skipping it.
package natstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/venn-gateway/venn/internal/freeport"
)

// envBinary names the variable that overrides the binary's path.
const envBinary = "VENN_NATS_SERVER"

// Bounds of Start and Restart.
const (
	// startAttempts covers the race between picking a free port and the
	// server binding it.
	startAttempts = 3
	// readyTimeout bounds one attempt's wait for the server, JetStream
	// included, to answer.
	readyTimeout = 20 * time.Second
	// readyPoll is the interval between readiness probes.
	readyPoll = 25 * time.Millisecond
	// stopTimeout bounds a graceful stop before the process is killed.
	stopTimeout = 10 * time.Second
	// logTailBytes is how much of the server's log a failure prints.
	logTailBytes = 4 << 10
	// maxLogBytes bounds the output kept of one process.
	maxLogBytes = 1 << 20
)

// Options configure one server. The zero value is a server with
// JetStream and no authentication.
type Options struct {
	// NoJetStream starts the server without JetStream.
	NoJetStream bool
	// MaxPayload is the server's max_payload (0: its default, 1 MiB).
	MaxPayload int
	// Token, or User and Password, require clients to authenticate.
	Token          string
	User, Password string
}

// Server is one running (or stopped) nats-server.
type Server struct {
	t    testing.TB
	bin  string
	opts Options
	port int
	dir  string // storage and config

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
	waitErr error         // set before done is closed
	log     *bytes.Buffer // the current process's output
}

// Binary returns the nats-server binary's path, or an error saying how to
// get it.
func Binary() (string, error) {
	if p := os.Getenv(envBinary); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/nats-server"
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() {
		return debian, nil
	}
	return "", errors.New("nats-server not found: run scripts/test.sh (it installs Debian's nats-server), apt-get install -y nats-server, or set " + envBinary)
}

// Start launches a server on a free port and returns once it (and its
// JetStream) answers. It is stopped when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, opts: opts, dir: t.TempDir()}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("nats-server log tail:\n%s", s.logTail())
		}
	})
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port, err := freeport.Port()
		if err != nil {
			t.Fatal(err)
		}
		s.port = port
		if err = s.start(); err == nil {
			return s
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
	}
	t.Fatalf("natstest: start nats-server: %v", errors.Join(errs...))
	return nil
}

// URL is the server's client URL, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Port is the server's client port.
func (s *Server) Port() int { return s.port }

// StoreDir is the server's JetStream storage folder.
func (s *Server) StoreDir() string { return filepath.Join(s.dir, "jetstream") }

// Connect opens a nats.go connection to the server, closed when the test
// ends; opts come after the server's own credentials.
func (s *Server) Connect(opts ...natsgo.Option) *natsgo.Conn {
	s.t.Helper()
	nc, err := natsgo.Connect(s.URL(), append(s.authOptions(), opts...)...)
	if err != nil {
		s.t.Fatalf("natstest: connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

func (s *Server) authOptions() []natsgo.Option {
	switch {
	case s.opts.Token != "":
		return []natsgo.Option{natsgo.Token(s.opts.Token)}
	case s.opts.User != "":
		return []natsgo.Option{natsgo.UserInfo(s.opts.User, s.opts.Password)}
	}
	return nil
}

// config is the server's configuration file.
func (s *Server) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:%d\"\n", s.port)
	fmt.Fprintf(&b, "server_name: \"venn-test-%d\"\n", s.port)
	if !s.opts.NoJetStream {
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}\n", s.StoreDir())
	}
	if s.opts.MaxPayload > 0 {
		fmt.Fprintf(&b, "max_payload: %d\n", s.opts.MaxPayload)
	}
	switch {
	case s.opts.Token != "":
		fmt.Fprintf(&b, "authorization {\n  token: %q\n}\n", s.opts.Token)
	case s.opts.User != "":
		fmt.Fprintf(&b, "authorization {\n  user: %q\n  password: %q\n}\n", s.opts.User, s.opts.Password)
	}
	return b.String()
}

// start launches the process and waits until it is ready.
func (s *Server) start() error {
	conf := filepath.Join(s.dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(s.config()), 0o600); err != nil {
		return err
	}
	log := new(bytes.Buffer)
	cmd := exec.Command(s.bin, "-c", conf)
	w := &lockedWriter{mu: &s.mu, buf: log}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.log = cmd, done, log
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()
	if err := s.waitReady(done); err != nil {
		s.Kill()
		return fmt.Errorf("%w; log tail:\n%s", err, s.logTail())
	}
	return nil
}

// waitReady polls until a client connects and, with JetStream, the
// JetStream API answers; or the process exits; or readyTimeout passes.
func (s *Server) waitReady(done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		err := s.probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			werr := s.waitErr
			s.mu.Unlock()
			return fmt.Errorf("nats-server exited before it was ready: %v", werr)
		case <-ctx.Done():
			return fmt.Errorf("nats-server not ready within %v: %w", readyTimeout, err)
		case <-tick.C:
		}
	}
}

func (s *Server) probe(ctx context.Context) error {
	opts := append(s.authOptions(), natsgo.Timeout(time.Second), natsgo.NoReconnect())
	nc, err := natsgo.Connect(s.URL(), opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	if s.opts.NoJetStream {
		return nc.FlushWithContext(ctx)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(pctx, "$JS.API.INFO", nil)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if bytes.Contains(m.Data, []byte(`"error"`)) {
		return fmt.Errorf("jetstream: %s", m.Data)
	}
	return nil
}

// Stop shuts the server down gracefully (SIGTERM: clients see their
// connection closed) and waits for it; past stopTimeout it is killed.
// Stopping a stopped server does nothing.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill kills the server at once (SIGKILL: a crash, as clients and the
// storage see it) and waits for it.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the server again, on the same port with the same
// storage, after Stop or Kill (it stops a running one first). The port
// may have been taken meanwhile: then the test fails.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("natstest: restart nats-server on port %d: %v", s.port, err)
	}
}

// Running reports whether the process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (s *Server) logTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	b := s.log.Bytes()
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
	}
	return string(b)
}

// lockedWriter collects the process's output under the server's lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() > maxLogBytes { // keep the tail: a failure prints only that
		tail := append([]byte(nil), w.buf.Bytes()[w.buf.Len()-logTailBytes:]...)
		w.buf.Reset()
		w.buf.Write(tail)
	}
	return w.buf.Write(p)
}

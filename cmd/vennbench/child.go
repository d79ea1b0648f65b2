package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Child process limits.
const (
	// childStartTimeout bounds how long a child may take to print its URL.
	childStartTimeout = 15 * time.Second
	// childStopGrace is how long a child gets after SIGTERM before SIGKILL.
	childStopGrace = 5 * time.Second
	// stderrTail is how much of a child's stderr is kept to explain a failure.
	stderrTail = 16 << 10
	// userHZ is the unit of utime and stime in /proc/PID/stat. The kernel
	// fixes it at 100 for user space on every architecture Go supports on
	// Linux (sysconf(_SC_CLK_TCK)), whatever CONFIG_HZ is.
	userHZ = 100
)

// child is one process vennbench started. It is stopped (and waited for) by
// stop, which every path that starts one defers.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	url    string // what the child printed, if it prints one

	done    chan struct{} // closed when the process has been waited for
	waitErr error         // set before done is closed
}

// startChild starts path with args. When printsURL is set it waits for the
// first line of the child's stdout and returns it as the child's URL.
func startChild(ctx context.Context, name string, printsURL bool, path string, args ...string) (*child, string, error) {
	cmd := exec.Command(path, args...)
	lines := &firstLine{ch: make(chan string, 1)}
	c := &child{name: name, cmd: cmd, stderr: &tailBuffer{max: stderrTail}, done: make(chan struct{})}
	cmd.Stdout = lines
	cmd.Stderr = c.stderr
	// If vennbench dies without running its defers (SIGKILL, a crash), the
	// kernel kills the children too rather than leaving them listening.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	if !printsURL {
		return c, "", nil
	}

	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	select {
	case url := <-lines.ch:
		c.url = strings.TrimSpace(url)
		return c, c.url, nil
	case <-c.done:
		err := fmt.Errorf("%s exited before printing its URL: %v%s", name, c.waitErr, c.stderrNote())
		return nil, "", err
	case <-timer.C:
		c.stop()
		return nil, "", fmt.Errorf("%s printed no URL within %v%s", name, childStartTimeout, c.stderrNote())
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the child has exited, and why.
func (c *child) exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.waitErr
	default:
		return false, nil
	}
}

// stop asks the child to exit, kills it after childStopGrace and waits for
// it either way. It is safe to call more than once.
func (c *child) stop() {
	if c == nil {
		return
	}
	if done, _ := c.exited(); done {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(childStopGrace)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// stderrNote is the tail of the child's stderr, for an error message.
func (c *child) stderrNote() string {
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	return "\n--- " + c.name + " stderr (tail) ---\n" + s
}

// cpuTime is the user plus system CPU time the process has used so far, all
// threads included, from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read cpu time: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("parse /proc stat: no command field")
	}
	// After ')' come field 3 (state) onwards: utime is the 12th of them.
	fields := strings.Fields(string(b[i+1:]))
	const utimeIdx, stimeIdx = 14 - 3, 15 - 3
	if len(fields) <= stimeIdx {
		return 0, fmt.Errorf("parse /proc stat: %d fields", len(fields)+2)
	}
	var ticks uint64
	for _, f := range []string{fields[utimeIdx], fields[stimeIdx]} {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// firstLine is a child's stdout: it hands the first line to ch and
// discards the rest, so a chatty child never blocks on a full pipe.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	ch   chan string // capacity 1
}

func (w *firstLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.ch <- string(w.buf[:i])
		w.sent = true
		w.buf = nil
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

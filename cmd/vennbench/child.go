package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/venn-gateway/venn/internal/cluster"
)

// Child process limits.
const (
	// childStartTimeout bounds how long a child may take to print its URL.
	childStartTimeout = 15 * time.Second
	// userHZ is the unit of utime and stime in /proc/PID/stat. The kernel
	// fixes it at 100 for user space on every architecture Go supports on
	// Linux (sysconf(_SC_CLK_TCK)), whatever CONFIG_HZ is.
	userHZ = 100
)

// child is one process vennbench started, a cluster.Proc with the URL it
// printed, if it prints one. It is stopped (and waited for) by Stop, which
// every path that starts one defers.
type child struct {
	*cluster.Proc
	url string
}

// startChild starts path with args. When printsURL is set it waits for the
// first line of the child's stdout and returns it as the child's URL.
func startChild(ctx context.Context, name string, printsURL bool, path string, args ...string) (*child, string, error) {
	lines := &firstLine{ch: make(chan string, 1)}
	p, err := cluster.Start(name, lines, nil, path, args...)
	if err != nil {
		return nil, "", err
	}
	c := &child{Proc: p}
	if !printsURL {
		return c, "", nil
	}

	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	select {
	case url := <-lines.ch:
		c.url = strings.TrimSpace(url)
		return c, c.url, nil
	case <-c.Done():
		_, werr := c.Exited()
		return nil, "", fmt.Errorf("%s exited before printing its URL: %v%s", name, werr, c.StderrNote())
	case <-timer.C:
		c.Stop()
		return nil, "", fmt.Errorf("%s printed no URL within %v%s", name, childStartTimeout, c.StderrNote())
	case <-ctx.Done():
		c.Stop()
		return nil, "", ctx.Err()
	}
}

// cpuTime is the user plus system CPU time the process has used so far, all
// threads included, from /proc/PID/stat.
func cpuTime(pid int) (time.Duration, error) {
	user, sys, err := cpuTimes(pid)
	return user + sys, err
}

// cpuTimes is cpuTime's user and system parts.
func cpuTimes(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read cpu time: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(b []byte) (user, sys time.Duration, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("parse /proc stat: no command field")
	}
	// After ')' come field 3 (state) onwards: utime is the 12th of them.
	fields := strings.Fields(string(b[i+1:]))
	const utimeIdx, stimeIdx = 14 - 3, 15 - 3
	if len(fields) <= stimeIdx {
		return 0, 0, fmt.Errorf("parse /proc stat: %d fields", len(fields)+2)
	}
	var ticks [2]time.Duration
	for j, f := range []string{fields[utimeIdx], fields[stimeIdx]} {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse /proc stat: %w", err)
		}
		ticks[j] = time.Duration(n) * (time.Second / userHZ)
	}
	return ticks[0], ticks[1], nil
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

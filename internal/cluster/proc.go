package cluster

import (
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process limits.
const (
	// StopGrace is how long Stop gives a process after SIGTERM before
	// SIGKILL.
	StopGrace = 5 * time.Second
	// stderrTail is how much of a process's stderr is kept for an error.
	stderrTail = 16 << 10
)

// Proc is one child process of the harness: venn, redis-server, a bench's
// upstream. Whoever starts one stops it (Stop or Kill), which waits for it.
type Proc struct {
	Name   string
	cmd    *exec.Cmd
	stderr *Tail         // nil when stderr went elsewhere
	done   chan struct{} // closed when the process has been waited for
	err    error         // why it exited, set before done is closed
}

// Start starts path with args. Its stdout goes to stdout and its stderr to
// stderr; a nil stdout is discarded, and a nil stderr is kept (its tail)
// for StderrNote. A writer that is not an *os.File is fed by a goroutine
// of the process's own, which ends when it exits.
func Start(name string, stdout, stderr io.Writer, path string, args ...string) (*Proc, error) {
	cmd := exec.Command(path, args...)
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{})}
	if stderr == nil {
		p.stderr = NewTail(stderrTail)
		stderr = p.stderr
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and why.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig (SIGSTOP to pause it past its lease, SIGCONT to resume).
func (p *Proc) Signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// Kill ends the process at once, paused or not (kill -9: no cleanup, no
// lease release), and waits for it. It is safe to call more than once.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	if done, _ := p.Exited(); done {
		return
	}
	p.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to exit, kills it after StopGrace and waits for it
// either way. It is safe to call more than once.
func (p *Proc) Stop() {
	if p == nil {
		return
	}
	if done, _ := p.Exited(); done {
		return
	}
	p.Signal(syscall.SIGTERM)
	timer := time.NewTimer(StopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Stderr is the tail of the process's stderr kept so far ("" when it went
// elsewhere).
func (p *Proc) Stderr() string {
	if p.stderr == nil {
		return ""
	}
	return p.stderr.String()
}

// StderrNote is the tail of the process's stderr, for an error message.
func (p *Proc) StderrNote() string {
	s := strings.TrimSpace(p.Stderr())
	if s == "" {
		return ""
	}
	return "\n--- " + p.Name + " stderr (tail) ---\n" + s
}

package misbehave

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// logQueue bounds the lines waiting for the writer.
const logQueue = 1024

// Event is one line of the misbehaviour log.
type Event struct {
	Time   time.Time `json:"time"`
	Chain  string    `json:"chain"`
	Remote string    `json:"remote"`
	Method string    `json:"method"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail,omitempty"`
}

// fileLog appends JSON lines to a file. Writes never block a call: lines
// go through a bounded queue to one writer goroutine, and a line that
// finds the queue full is dropped and counted. Each line is one write to
// a file opened for appending, so chains may share the file.
type fileLog struct {
	path    string
	open    func(path string) (io.WriteCloser, error)
	log     *slog.Logger
	dropped prometheus.Counter
	queue   int

	mu   sync.RWMutex
	q    chan []byte // nil before start and after stop
	done chan struct{}
}

func openAppend(path string) (io.WriteCloser, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
}

// start opens the file and starts the writer; stop ends it.
func (l *fileLog) start() error {
	if l == nil {
		return nil
	}
	w, err := l.open(l.path)
	if err != nil {
		return fmt.Errorf("misbehaviour log: %w", err)
	}
	q, done := make(chan []byte, l.queue), make(chan struct{})
	l.mu.Lock()
	l.q, l.done = q, done
	l.mu.Unlock()
	go l.run(w, q, done)
	return nil
}

func (l *fileLog) run(w io.WriteCloser, q <-chan []byte, done chan<- struct{}) {
	defer close(done)
	defer func() {
		if err := w.Close(); err != nil {
			l.log.Warn("misbehaviour log: close", "err", err)
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			l.log.Error("misbehaviour log writer panicked; no more lines are written", "panic", v)
		}
	}()
	var warned time.Time
	for line := range q {
		if _, err := w.Write(line); err != nil {
			l.dropped.Inc()
			if time.Since(warned) > time.Minute {
				warned = time.Now()
				l.log.Warn("misbehaviour log: write failed; lines are dropped", "err", err)
			}
		}
	}
}

// write queues one line, or drops it when the writer is behind or stopped.
func (l *fileLog) write(line []byte) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.q == nil {
		l.dropped.Inc()
		return
	}
	select {
	case l.q <- line:
	default:
		l.dropped.Inc()
	}
}

// stop writes what is queued, closes the file and waits for the writer, at
// most until ctx ends.
func (l *fileLog) stop(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	q, done := l.q, l.done
	l.q = nil
	l.mu.Unlock()
	if q == nil {
		return nil
	}
	close(q)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("misbehaviour log: %w", ctx.Err())
	}
}

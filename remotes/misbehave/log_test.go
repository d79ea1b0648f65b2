package misbehave

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// blockingWriter blocks its first Write until released.
type blockingWriter struct {
	entered, release chan struct{}
	once             sync.Once

	mu     sync.Mutex
	lines  []string
	closed bool
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() {
		close(w.entered)
		<-w.release
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(b))
	return len(b), nil
}

func (w *blockingWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

// A writer that falls behind costs lines, never a blocked call; stop writes
// what was queued and closes the file.
func TestMisbehaviourLogDropsWhenFull(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	m := NewMetrics(nil)
	l := &fileLog{path: "x", open: func(string) (io.WriteCloser, error) { return w, nil },
		log: slog.New(slog.DiscardHandler), dropped: m.logDropped.WithLabelValues("test"), queue: 2}
	l.write([]byte("before start\n"))
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	l.write([]byte("1\n"))
	<-w.entered // the writer holds line 1
	for i := 2; i <= 5; i++ {
		l.write(fmt.Appendf(nil, "%d\n", i)) // 2 and 3 fit the queue
	}
	if got := testutil.ToFloat64(l.dropped); got != 3 {
		t.Fatalf("dropped %v, want 3 (one before start, two over the queue)", got)
	}
	close(w.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(w.lines) != "[1\n 2\n 3\n]" || !w.closed {
		t.Fatalf("wrote %q (closed %v), want lines 1-3 and the file closed", w.lines, w.closed)
	}
	l.write([]byte("after stop\n"))
	if got := testutil.ToFloat64(l.dropped); got != 4 {
		t.Fatalf("a line after stop: dropped %v, want 4", got)
	}
}

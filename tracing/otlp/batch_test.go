package otlp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// batches is an exporter that records each export's span names and says
// each one on exported. While hold is set, an export waits for release
// after saying it started.
type batches struct {
	mu       sync.Mutex
	got      [][]string
	shutdown int

	hold     bool
	started  chan struct{}
	release  chan struct{}
	exported chan int // each export's size; buffered by the test

	running atomic.Int32
	overlap atomic.Bool
}

func newBatches() *batches {
	return &batches{started: make(chan struct{}, 100), release: make(chan struct{}), exported: make(chan int, 10000)}
}

func (e *batches) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.running.Add(1) > 1 {
		e.overlap.Store(true)
	}
	defer e.running.Add(-1)
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	e.mu.Lock()
	hold := e.hold
	e.mu.Unlock()
	if hold {
		e.started <- struct{}{}
		select {
		case <-e.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	e.got = append(e.got, names)
	e.mu.Unlock()
	e.exported <- len(names)
	return nil
}

func (e *batches) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown++
	return nil
}

func (e *batches) all() (batches [][]string, spans []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, b := range e.got {
		spans = append(spans, b...)
	}
	return append([][]string(nil), e.got...), spans
}

// wait is the next export's size; the test fails after 10 s without one.
func (e *batches) wait(t *testing.T) int {
	t.Helper()
	select {
	case n := <-e.exported:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no export in 10 s")
		return 0
	}
}

func span(name string, sampled bool) sdktrace.ReadOnlySpan {
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	return tracetest.SpanStub{Name: name, SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: flags})}.Snapshot()
}

// opts has a delay no test waits for: exports come from full batches,
// ForceFlush or Shutdown.
func opts(queue, batch int) BatchOptions {
	return BatchOptions{ScheduleDelay: time.Hour, ExportTimeout: 10 * time.Second, MaxQueueSize: queue, MaxExportBatchSize: batch}
}

// TestBatcherConcurrent: spans ended from many goroutines at once are all
// exported once, each goroutine's in its order, in batches of at most the
// batch size, one export at a time.
func TestBatcherConcurrent(t *testing.T) {
	const workers, each, batch = 8, 500, 64
	e := newBatches()
	b := NewBatcher(e, opts(workers*each, batch))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				b.OnEnd(span(fmt.Sprintf("%d/%d", w, i), true))
			}
		})
	}
	wg.Wait()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, spans := e.all()
	if len(spans) != workers*each || b.Dropped() != 0 {
		t.Fatalf("%d spans exported, %d dropped; want %d, 0", len(spans), b.Dropped(), workers*each)
	}
	for _, g := range got {
		if len(g) > batch || len(g) == 0 {
			t.Errorf("an export of %d spans", len(g))
		}
	}
	next := make([]int, workers)
	for _, s := range spans {
		var w, i int
		fmt.Sscanf(s, "%d/%d", &w, &i)
		if i != next[w] {
			t.Fatalf("worker %d: span %d exported after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	if e.overlap.Load() {
		t.Error("two exports ran at once")
	}
}

// TestBatcherFullBatch: a full batch is exported without waiting for the
// delay; the rest waits.
func TestBatcherFullBatch(t *testing.T) {
	e := newBatches()
	b := NewBatcher(e, opts(100, 4))
	defer b.Shutdown(context.Background())
	for i := range 6 {
		b.OnEnd(span(fmt.Sprint(i), true))
	}
	if n := e.wait(t); n != 4 {
		t.Fatalf("exported %d spans, want the batch of 4", n)
	}
	b.mu.Lock()
	left := len(b.queue)
	b.mu.Unlock()
	if left != 2 {
		t.Errorf("%d spans queued after the batch, want 2", left)
	}
}

// TestBatcherDelay: a partial batch goes when the delay has passed.
func TestBatcherDelay(t *testing.T) {
	e := newBatches()
	o := opts(100, 50)
	o.ScheduleDelay = 20 * time.Millisecond
	b := NewBatcher(e, o)
	defer b.Shutdown(context.Background())
	for i := range 3 {
		b.OnEnd(span(fmt.Sprint(i), true))
	}
	if n := e.wait(t); n != 3 {
		t.Fatalf("exported %d spans, want the 3 queued", n)
	}
}

// TestBatcherNoDelay: a delay of 0 exports each span as it ends.
func TestBatcherNoDelay(t *testing.T) {
	e := newBatches()
	o := opts(100, 50)
	o.ScheduleDelay = 0
	b := NewBatcher(e, o)
	defer b.Shutdown(context.Background())
	b.OnEnd(span("a", true))
	if n := e.wait(t); n != 1 {
		t.Fatalf("exported %d spans, want 1", n)
	}
}

// TestBatcherDrops: while an export is stuck, spans past the queue's size
// are dropped and counted; the queued ones go once it is free; unsampled
// spans are never kept.
func TestBatcherDrops(t *testing.T) {
	e := newBatches()
	e.hold = true
	b := NewBatcher(e, opts(4, 2))
	b.OnEnd(span("unsampled", false))
	b.OnEnd(span("a", true))
	b.OnEnd(span("b", true)) // a full batch: its export starts, and waits
	<-e.started
	for _, n := range []string{"c", "d", "e", "f", "x", "y", "z"} {
		b.OnEnd(span(n, true))
	}
	if got := b.Dropped(); got != 3 {
		t.Errorf("Dropped() = %d, want 3", got)
	}
	e.mu.Lock()
	e.hold = false
	e.mu.Unlock()
	close(e.release)
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, spans := e.all(); strings.Join(spans, "") != "abcdef" {
		t.Errorf("exported %v, want a to f", spans)
	}
}

// TestBatcherForceFlush: ForceFlush exports what is queued at once, and
// gives up with its context while another export holds it up.
func TestBatcherForceFlush(t *testing.T) {
	e := newBatches()
	b := NewBatcher(e, opts(100, 2))
	defer b.Shutdown(context.Background())
	if err := b.ForceFlush(context.Background()); err != nil || len(e.exported) != 0 {
		t.Fatalf("ForceFlush of nothing: %v, %d exports", err, len(e.exported))
	}
	for _, n := range []string{"a", "b", "c"} {
		b.OnEnd(span(n, true))
	}
	e.wait(t) // the full batch, a and b
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, spans := e.all(); strings.Join(spans, "") != "abc" {
		t.Errorf("exported %v after ForceFlush, want a, b, c", spans)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.ForceFlush(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("ForceFlush with a cancelled context = %v", err)
	}

	e.mu.Lock()
	e.hold = true
	e.mu.Unlock()
	b.OnEnd(span("d", true))
	b.OnEnd(span("e", true)) // a batch; its export waits
	<-e.started
	b.OnEnd(span("f", true))
	ctx, cancel := context.WithCancel(context.Background())
	flushed := make(chan error)
	go func() { flushed <- b.ForceFlush(ctx) }()
	cancel()
	if err := <-flushed; !errors.Is(err, context.Canceled) {
		t.Errorf("ForceFlush behind a stuck export = %v, want its context's error", err)
	}
	e.mu.Lock()
	e.hold = false
	e.mu.Unlock()
	close(e.release)
}

// TestBatcherShutdown: Shutdown exports what is queued and shuts the
// exporter down once; after it nothing is kept or exported.
func TestBatcherShutdown(t *testing.T) {
	e := newBatches()
	b := NewBatcher(e, opts(100, 50))
	for _, n := range []string{"a", "b", "c"} {
		b.OnEnd(span(n, true))
	}
	for range 2 {
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	b.OnEnd(span("late", true))
	if err := b.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, spans := e.all()
	if len(got) != 1 || strings.Join(spans, "") != "abc" || e.shutdown != 1 {
		t.Errorf("exports %v, exporter shut down %d times; want one of a, b, c and once", got, e.shutdown)
	}
}

// TestBatcherExportTimeout: an export that does not end is cancelled after
// the export timeout, and Shutdown goes on.
func TestBatcherExportTimeout(t *testing.T) {
	e := newBatches()
	e.hold = true
	o := opts(100, 50)
	o.ExportTimeout = time.Millisecond
	b := NewBatcher(e, o)
	b.OnEnd(span("a", true))
	if err := b.Shutdown(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown over a stuck export = %v, want the export's deadline", err)
	}
	if e.shutdown != 1 {
		t.Errorf("exporter shut down %d times", e.shutdown)
	}
}

func TestBatchOptionsFromEnv(t *testing.T) {
	for _, k := range []string{envScheduleDelay, envExportTimeout, envMaxQueueSize, envMaxBatchSize} {
		t.Setenv(k, "")
	}
	want := BatchOptions{ScheduleDelay: 5 * time.Second, ExportTimeout: 30 * time.Second, MaxQueueSize: 2048, MaxExportBatchSize: 512}
	if got := BatchOptionsFromEnv(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	t.Setenv(envScheduleDelay, "250")
	t.Setenv(envExportTimeout, "1500")
	t.Setenv(envMaxQueueSize, "100")
	t.Setenv(envMaxBatchSize, "10")
	want = BatchOptions{ScheduleDelay: 250 * time.Millisecond, ExportTimeout: 1500 * time.Millisecond, MaxQueueSize: 100, MaxExportBatchSize: 10}
	if got := BatchOptionsFromEnv(); got != want {
		t.Errorf("from the variables %+v, want %+v", got, want)
	}
	t.Setenv(envScheduleDelay, "5s") // not an integer: the default
	t.Setenv(envMaxBatchSize, "1000")
	if got := BatchOptionsFromEnv(); got.ScheduleDelay != 5*time.Second || got.MaxExportBatchSize != 100 {
		t.Errorf("delay %v, batch %d; want the default 5s and the queue's 100", got.ScheduleDelay, got.MaxExportBatchSize)
	}
	t.Setenv(envMaxQueueSize, "600")
	if got := BatchOptionsFromEnv(); got.MaxExportBatchSize != 512 {
		t.Errorf("batch 1000 over a queue of 600: %d, want the default 512", got.MaxExportBatchSize)
	}
}

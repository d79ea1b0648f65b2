package otlp

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The batch variables, read as the SDK's batch span processor reads them.
const (
	envScheduleDelay = "OTEL_BSP_SCHEDULE_DELAY"        // ms
	envExportTimeout = "OTEL_BSP_EXPORT_TIMEOUT"        // ms
	envMaxQueueSize  = "OTEL_BSP_MAX_QUEUE_SIZE"        // spans
	envMaxBatchSize  = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" // spans
)

// BatchOptions are a Batcher's limits.
type BatchOptions struct {
	// ScheduleDelay is the longest a span waits for its batch to fill;
	// 0 or less: a span is exported as soon as it ends.
	ScheduleDelay time.Duration
	// ExportTimeout bounds each export; 0 or less: no bound.
	ExportTimeout time.Duration
	// MaxQueueSize is the most spans waiting; past it spans are dropped
	// and counted (Batcher.Dropped). Below 1: 1.
	MaxQueueSize int
	// MaxExportBatchSize is the most spans one export sends, and the
	// count at which an export starts without waiting for the delay.
	// Below 1: 1.
	MaxExportBatchSize int
}

// BatchOptionsFromEnv are the SDK's batch span processor's defaults (5 s,
// 30 s, 2,048 and 512, sdktrace.Default*) under OTEL_BSP_SCHEDULE_DELAY,
// OTEL_BSP_EXPORT_TIMEOUT, OTEL_BSP_MAX_QUEUE_SIZE and
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, read as the SDK reads them: an integer
// (milliseconds for the first two), a value that is not one leaves the
// default, and a batch size above the queue size is the smaller of the
// default batch size and the queue size.
func BatchOptionsFromEnv() BatchOptions {
	queue := envInt(envMaxQueueSize, sdktrace.DefaultMaxQueueSize)
	batch := envInt(envMaxBatchSize, sdktrace.DefaultMaxExportBatchSize)
	if batch > queue {
		batch = min(sdktrace.DefaultMaxExportBatchSize, queue)
	}
	return BatchOptions{
		ScheduleDelay:      time.Duration(envInt(envScheduleDelay, sdktrace.DefaultScheduleDelay)) * time.Millisecond,
		ExportTimeout:      time.Duration(envInt(envExportTimeout, sdktrace.DefaultExportTimeout)) * time.Millisecond,
		MaxQueueSize:       queue,
		MaxExportBatchSize: batch,
	}
}

func envInt(key string, def int) int {
	v, err := strconv.Atoi(os.Getenv(key))
	if err != nil {
		return def
	}
	return v
}

// Batcher is a span processor that exports ended spans in batches, as the
// SDK's batch span processor does, without its cost on every span: OnEnd
// appends the span to a slice under a mutex, and the export goroutine is
// woken only when a batch is full; otherwise it wakes when ScheduleDelay
// has passed since its last export. (The SDK's sends each span through a
// channel to its goroutine, a wake-up of the goroutine for every span.)
// One export runs at a time, as sdktrace.SpanExporter requires.
type Batcher struct {
	exp  sdktrace.SpanExporter
	opts BatchOptions

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan // ended, sampled, not yet taken
	stopped bool                    // Shutdown began: OnEnd keeps nothing

	dropped atomic.Uint64

	// exporting is held (a value in it) by whoever exports, one at a
	// time; it guards out and closed. A channel, not a mutex, so that
	// ForceFlush and Shutdown can give up waiting for it with their
	// context.
	exporting chan struct{}
	out       []sdktrace.ReadOnlySpan // the batch being exported; its array is queue's spare
	closed    bool                    // the exporter is shut down: nothing more is exported

	full     chan struct{} // a full batch waits (capacity 1)
	stop     chan struct{} // closed by Shutdown
	done     chan struct{} // closed when the goroutine has returned
	shutdown sync.Once
}

var _ sdktrace.SpanProcessor = (*Batcher)(nil)

// NewBatcher starts a Batcher exporting to exp; Shutdown stops it.
func NewBatcher(exp sdktrace.SpanExporter, opts BatchOptions) *Batcher {
	opts.MaxQueueSize = max(opts.MaxQueueSize, 1)
	// A batch larger than the queue could never fill.
	opts.MaxExportBatchSize = min(max(opts.MaxExportBatchSize, 1), opts.MaxQueueSize)
	b := &Batcher{
		exp:       exp,
		opts:      opts,
		exporting: make(chan struct{}, 1),
		full:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go b.run()
	return b
}

// Dropped is how many spans have been dropped because the queue was full.
func (b *Batcher) Dropped() uint64 { return b.dropped.Load() }

// OnStart does nothing: spans are kept when they end.
func (*Batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s when it is sampled, or drops and counts it when the
// queue is full. It wakes the export goroutine when the queue has just
// reached a batch (or at once, without a delay).
func (b *Batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.queue) >= b.opts.MaxQueueSize {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	b.queue = append(b.queue, s)
	wake := len(b.queue) == b.opts.MaxExportBatchSize || b.opts.ScheduleDelay <= 0
	b.mu.Unlock()
	if wake {
		select {
		case b.full <- struct{}{}:
		default: // already woken
		}
	}
}

// run is the export goroutine: full batches when OnEnd says one is ready
// (everything queued, without a delay), everything queued when the delay
// has passed since the last export.
func (b *Batcher) run() {
	defer close(b.done)
	delay, fullOnly := b.opts.ScheduleDelay, true
	if delay <= 0 {
		delay, fullOnly = time.Hour, false // every span wakes it (OnEnd)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	ctx := context.Background()
	for {
		var err error
		select {
		case <-b.stop:
			return
		case <-b.full:
			err = b.flush(ctx, fullOnly, -1)
		case <-t.C:
			err = b.flush(ctx, false, -1)
		}
		if err != nil {
			otel.Handle(err) // as the SDK's processor reports a failed export
		}
		t.Reset(delay)
	}
}

// flush exports what is queued, one batch an export, until no batch is
// left (fullOnly: until less than a full one is), limit spans have gone
// (limit < 0: no limit) or ctx is done. It waits for an export already
// running to end.
func (b *Batcher) flush(ctx context.Context, fullOnly bool, limit int) error {
	select {
	case b.exporting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.exporting }()
	var errs error
	for limit != 0 && !b.closed && ctx.Err() == nil {
		batch := b.take(fullOnly, limit)
		if len(batch) == 0 {
			break
		}
		errs = errors.Join(errs, b.export(ctx, batch))
		clear(batch) // the spans go; the array is the queue's next spare
		b.out = batch[:0]
		if limit > 0 {
			limit -= len(batch)
		}
	}
	return errs
}

// take removes the next batch from the queue: at most a batch and limit
// spans (limit < 0: no limit); none when fullOnly and less than a full
// batch waits. The caller holds exporting.
func (b *Batcher) take(fullOnly bool, limit int) []sdktrace.ReadOnlySpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.opts.MaxExportBatchSize)
	if fullOnly && n < b.opts.MaxExportBatchSize {
		return nil
	}
	if limit >= 0 {
		n = min(n, limit)
	}
	if n == 0 {
		return nil
	}
	if n == len(b.queue) { // the common case: the whole queue, swapped for the spare
		batch := b.queue
		b.queue = b.out
		return batch
	}
	batch := append(b.out, b.queue[:n]...)
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch
}

// export sends one batch, within ExportTimeout.
func (b *Batcher) export(ctx context.Context, batch []sdktrace.ReadOnlySpan) error {
	if b.opts.ExportTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.opts.ExportTimeout, errors.New("tracing: span export timed out"))
		defer cancel()
	}
	return b.exp.ExportSpans(ctx, batch)
}

// ForceFlush exports the spans queued when it is called, waiting for an
// export already running, unless ctx is done first. After Shutdown it does
// nothing.
func (b *Batcher) ForceFlush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	n, stopped := len(b.queue), b.stopped
	b.mu.Unlock()
	if stopped || n == 0 {
		return nil
	}
	return b.flush(ctx, false, n)
}

// Shutdown stops taking spans, stops the goroutine, exports what is
// queued and shuts the exporter down, within ctx. Only the first call
// does anything; after it nothing is exported.
func (b *Batcher) Shutdown(ctx context.Context) error {
	var err error
	b.shutdown.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = b.flush(ctx, false, -1)
		select {
		case b.exporting <- struct{}{}:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
			return
		}
		b.closed = true
		<-b.exporting
		err = errors.Join(err, b.exp.Shutdown(ctx))
	})
	return err
}

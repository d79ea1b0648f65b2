package reqlog

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// writeBuffer is the output's buffer.
const writeBuffer = 64 << 10

// flushEvery is how often the writer wakes to write what is queued. A
// call never wakes it: at one wake-up and one write per line, a replica
// at low load would pay a goroutine switch and a syscall per call. When
// the queue is half full, the call that sees it wakes the writer early.
const flushEvery = 100 * time.Millisecond

// Log writes the request log. Record is its hook; Start opens the output
// and starts the writer, Stop drains and stops it.
type Log struct {
	cfg Config
	out io.Writer // nil until Start when the output is a file
	log *slog.Logger

	lines chan entry
	wake  chan struct{} // the queue is half full
	stop  chan struct{}
	done  chan struct{}
	file  *os.File // opened by Start; nil for stderr or a given writer

	written, dropped prometheus.Counter

	txHash TxHash // nil: a raw transaction is logged without its hash
}

// TxHash is the hash of the signed transaction in a raw transaction's
// params (eth_sendRawTransaction's); ok is false when they hold none. The
// log is given it (app gives integrity.SentTxHash): decoding a
// transaction is not the log's business.
type TxHash func(params json.RawMessage) (hash string, ok bool)

// entry is what a line needs of one call, copied off the call on its
// goroutine: strings and the client's own bytes, which jrpc never reuses.
type entry struct {
	start      time.Time
	id, chain  string
	method     string
	transport  string
	key        string
	ip         netip.Addr
	remoteAddr string // when ip is not known
	batch      int
	note       jrpc.Note
	took       time.Duration
	code       int
	outcome    string
	status     int
	in, out    int
	params     json.RawMessage // only when logged: params, or a raw transaction to hash
}

// New returns the log of cfg (defaulted) writing to out, or, with out nil,
// to cfg.Output (opened by Start), naming a raw transaction by txHash. Its
// counters are registered on reg (nil: none).
func New(cfg Config, out io.Writer, log *slog.Logger, reg prometheus.Registerer, txHash TxHash) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{cfg: cfg, out: out, log: log, txHash: txHash,
		lines: make(chan entry, max(cfg.Buffer, 1)),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}), done: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "request_log", Name: "lines_total",
			Help: "Request log lines written."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "request_log", Name: "dropped_total",
			Help: "Request log lines dropped because the output could not keep up (or was failing)."}),
	}
	if reg != nil {
		reg.MustRegister(l.written, l.dropped)
	}
	if l.out == nil {
		switch cfg.Output {
		case "stderr":
			l.out = os.Stderr
		case "stdout":
			l.out = os.Stdout
		}
	}
	return l
}

// Start opens the output file, if any, and starts the writer.
func (l *Log) Start(context.Context) error {
	if l.out == nil {
		f, err := os.OpenFile(l.cfg.Output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Errorf("request_log.output: %w", err)
		}
		l.file, l.out = f, f
	}
	go l.run()
	return nil
}

// Stop writes the lines queued, then stops the writer and closes the
// file, or gives up when ctx ends first (a stuck output).
func (l *Log) Stop(ctx context.Context) error {
	close(l.stop)
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("request log: stop: %w", ctx.Err())
	}
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}

// Record is the jrpc.Options.OnCall hook: it queues c's line, or drops
// and counts it when the queue is full. It never blocks.
func (l *Log) Record(c jrpc.Call) {
	if l.cfg.Sample < 1 && rand.Float64() >= l.cfg.Sample {
		return
	}
	e := entry{start: c.Start, chain: c.Chain, method: c.Method, batch: c.Batch, note: c.Note, took: c.Duration,
		code: c.Code, outcome: c.Outcome, status: c.Status, in: c.BytesIn, out: c.BytesOut}
	if p := c.Peer; p != nil {
		e.id, e.transport, e.key, e.ip = p.RequestID, p.Transport, p.Key, p.ClientIP
		if !e.ip.IsValid() {
			e.remoteAddr = p.RemoteAddr
		}
	}
	if l.cfg.Params {
		e.params = c.Params
	}
	select {
	case l.lines <- e:
	default:
		l.dropped.Inc()
		return
	}
	if len(l.lines) > cap(l.lines)/2 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// run is the writer: every flushEvery (or when woken) it encodes and
// writes every line queued, then flushes.
func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	w := bufio.NewWriterSize(l.out, writeBuffer)
	buf := make([]byte, 0, 1024)
	failing := false
	drain := func() {
		for n := len(l.lines); n > 0; n-- { // what is queued now, no more
			e := <-l.lines
			buf = l.appendLine(buf[:0], &e)
			if _, err := w.Write(buf); err != nil {
				l.failed(&failing, err)
				w.Reset(l.out) // drop what the failed output holds
				continue
			}
			l.written.Inc()
		}
		if err := w.Flush(); err != nil {
			l.failed(&failing, err)
			w.Reset(l.out)
		} else {
			failing = false
		}
	}
	for {
		select {
		case <-tick.C:
		case <-l.wake:
		case <-l.stop:
			drain()
			return
		}
		drain()
	}
}

// failed logs the first error of a failing output (once until it
// recovers); the lines lost count as dropped.
func (l *Log) failed(failing *bool, err error) {
	l.dropped.Inc()
	if !*failing {
		*failing = true
		l.log.Warn("request log: write failed; dropping lines until it recovers", "err", err)
	}
}

// isRawTx reports a method whose params are a signed transaction.
func isRawTx(method string) bool { return strings.HasPrefix(method, "eth_sendRawTransaction") }

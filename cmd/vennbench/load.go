package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/jsonscan"
)

// Load generator limits.
const (
	// requestTimeout bounds one call, so a hung target cannot hold a
	// worker past its window by more than this.
	requestTimeout = 10 * time.Second
	// maxReplyBytes bounds how much of a reply is read; a balance reply is
	// under 100 bytes.
	maxReplyBytes = 64 << 10
	// maxErrorSamples is how many distinct error texts a window keeps.
	maxErrorSamples = 3
	// samplesPrealloc is each worker's initial latency slice; it grows if
	// needed, but rarely during a window.
	samplesPrealloc = 1 << 14
)

// loader sends JSON-RPC calls: by default eth_getBalance with a fresh
// address per call. One loader serves every target, so they share its
// keep-alive Transport.
type loader struct {
	client *http.Client
	// statsClient reads the upstream's counters on a connection of its own,
	// so reading them does not disturb the counted connections.
	statsClient *http.Client
	// prefix is the random first 12 bytes (hex) of every address in this
	// run; the last 8 are the call's sequence number, so no address repeats
	// within a run and none is likely to repeat across runs.
	prefix string
	seq    atomic.Uint64
	// balance is the gateway bench's call: eth_getBalance of a fresh
	// address.
	balance callKind
}

// callKind is one JSON-RPC call the load sends and how its answer is
// checked.
type callKind struct {
	name    string
	request func(b []byte, n uint64) []byte // appends call n, id n
	check   func(result []byte) error       // checks the reply's result member
}

func newLoader() (*loader, error) {
	var p [12]byte
	if _, err := rand.Read(p[:]); err != nil {
		return nil, fmt.Errorf("address prefix: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no total limit; per host is what matters
	tr.MaxIdleConnsPerHost = maxConcurrency
	// A gateway may compress for a client that asks; every target gets the
	// same plain request so the hop cost is compared, not gzip.
	tr.DisableCompression = true
	l := &loader{
		client:      &http.Client{Transport: tr, Timeout: requestTimeout},
		statsClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: requestTimeout},
		prefix:      hex.EncodeToString(p[:]),
	}
	l.balance = callKind{name: "eth_getBalance", request: l.appendRequest, check: checkQuantity}
	return l, nil
}

// closeIdle drops kept-alive connections, so each window starts with the
// target's connections opened by its own warm-up.
func (l *loader) closeIdle() { l.client.CloseIdleConnections() }

// close drops every idle connection of the loader.
func (l *loader) close() {
	l.client.CloseIdleConnections()
	l.statsClient.CloseIdleConnections()
}

// upstreamStats reads the upstream child's request and connection counts.
func (l *loader) upstreamStats(ctx context.Context, upURL string) (stats, error) {
	var st stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(upURL, "/")+statsPath, nil)
	if err != nil {
		return st, fmt.Errorf("upstream stats: %w", err)
	}
	resp, err := l.statsClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("upstream stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("upstream stats: HTTP %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReplyBytes)).Decode(&st); err != nil {
		return st, fmt.Errorf("upstream stats: %w", err)
	}
	return st, nil
}

// loadResult is what one window of load saw.
type loadResult struct {
	OK        int             // calls answered with a result
	Errors    int             // calls that failed in any way
	ErrSample []string        // first distinct error texts
	Elapsed   time.Duration   // from start until the last worker stopped
	Latencies []time.Duration // of the OK calls, sorted ascending
}

// run keeps conc balance calls in flight against url for d.
func (l *loader) run(ctx context.Context, url string, conc int, d time.Duration) loadResult {
	return l.runCalls(ctx, url, conc, d, l.balance)
}

// runCalls keeps conc calls of kind in flight against url for d, through
// the loader's http.Client.
func (l *loader) runCalls(ctx context.Context, url string, conc int, d time.Duration, kind callKind) loadResult {
	return l.runWith(ctx, conc, d, kind, func() poster { return &stdPoster{client: l.client, url: url} })
}

// poster is one load worker's way of sending a call: it posts body and
// reads the reply's body into reply, failing on anything but HTTP 200.
type poster interface {
	post(ctx context.Context, body []byte, reply *bytes.Buffer) error
	close()
}

// stdPoster posts through a shared http.Client.
type stdPoster struct {
	client *http.Client
	url    string
}

func (p *stdPoster) post(ctx context.Context, body []byte, reply *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	reply.Reset()
	_, err = reply.ReadFrom(io.LimitReader(resp.Body, maxReplyBytes))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, reply.Bytes())
	}
	return nil
}

func (p *stdPoster) close() {}

// runWith keeps conc calls of kind in flight for d, each worker sending
// through a poster of its own, and returns what it saw. Workers start no
// call after d; the window ends when the last in-flight call returns.
func (l *loader) runWith(ctx context.Context, conc int, d time.Duration, kind callKind, newPoster func() poster) loadResult {
	results := make([]workerResult, conc)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for i := range conc {
		wg.Go(func() {
			r := &results[i]
			r.lat = make([]time.Duration, 0, samplesPrealloc)
			p := newPoster()
			defer p.close()
			var body []byte
			var reply bytes.Buffer
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				n := l.seq.Add(1)
				body = kind.request(body[:0], n)
				err := p.post(ctx, body, &reply)
				if err == nil {
					err = checkReplyOf(reply.Bytes(), n, kind.check)
				}
				if !r.note(ctx, err, time.Since(t0)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return mergeResults(results, time.Since(start))
}

// workerResult is what one load worker saw.
type workerResult struct {
	ok, errs int
	errText  []string
	lat      []time.Duration
}

// note records one call that took dt and failed with err (nil: OK). It
// returns false when ctx ended: the failure was the interruption, not the
// target's, and the worker is to stop.
func (r *workerResult) note(ctx context.Context, err error, dt time.Duration) bool {
	if err == nil {
		r.ok++
		r.lat = append(r.lat, dt)
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	r.errs++
	if len(r.errText) < maxErrorSamples {
		r.errText = append(r.errText, err.Error())
	}
	return true
}

// mergeResults is the window the workers saw together.
func mergeResults(results []workerResult, elapsed time.Duration) loadResult {
	res := loadResult{Elapsed: elapsed}
	total := 0
	for _, r := range results {
		total += len(r.lat)
	}
	res.Latencies = make([]time.Duration, 0, total)
	for _, r := range results {
		res.OK += r.ok
		res.Errors += r.errs
		res.Latencies = append(res.Latencies, r.lat...)
		for _, e := range r.errText {
			if len(res.ErrSample) < maxErrorSamples && !slices.Contains(res.ErrSample, e) {
				res.ErrSample = append(res.ErrSample, e)
			}
		}
	}
	slices.Sort(res.Latencies)
	return res
}

// appendRequest appends call n: eth_getBalance of a fresh address at latest.
func (l *loader) appendRequest(b []byte, n uint64) []byte {
	return l.appendBalanceAt(b, n, `"latest"`)
}

// appendBalanceAt appends call n: eth_getBalance of a fresh address at
// block (a JSON value).
func (l *loader) appendBalanceAt(b []byte, n uint64, block string) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, `,"method":"eth_getBalance","params":["0x`...)
	b = append(b, l.prefix...)
	var seq [8]byte
	for i := range seq {
		seq[i] = byte(n >> (56 - 8*i))
	}
	b = hex.AppendEncode(b, seq[:])
	b = append(b, `",`...)
	b = append(b, block...)
	return append(b, `]}`...)
}

// call posts body and checks the reply is a result for id n that passes
// check.
func (l *loader) call(ctx context.Context, url string, body []byte, reply *bytes.Buffer, n uint64, check func([]byte) error) error {
	p := stdPoster{client: l.client, url: url}
	if err := p.post(ctx, body, reply); err != nil {
		return err
	}
	return checkReplyOf(reply.Bytes(), n, check)
}

// checkReply accepts only a JSON-RPC result that is a hex quantity for id n.
func checkReply(b []byte, n uint64) error { return checkReplyOf(b, n, checkQuantity) }

// checkReplyOf accepts only valid JSON-RPC with id n and a result that
// passes check. It checks the whole reply's syntax in one pass and
// allocates nothing on success, so the load's own CPU stays small next to
// a target that answers from memory.
func checkReplyOf(b []byte, n uint64, check func([]byte) error) error {
	start := jsonscan.SkipSpace(b, 0)
	end, err := jsonscan.ValidValue(b, start, 0)
	if err != nil || jsonscan.SkipSpace(b, end) != len(b) || b[start] != '{' {
		return fmt.Errorf("reply is not JSON-RPC: %.200s", b)
	}
	var id, result, rpcErr []byte
	members := jsonscan.Object{Data: b, I: start + 1}
	for {
		k, v, ok := members.Next()
		if !ok {
			break
		}
		switch string(k) {
		case "id":
			id = v
		case "result":
			result = v
		case "error":
			rpcErr = v
		}
	}
	if len(rpcErr) > 0 && string(rpcErr) != "null" {
		return fmt.Errorf("error reply: %.200s", rpcErr)
	}
	var want [20]byte
	if string(id) != string(strconv.AppendUint(want[:0], n, 10)) {
		return fmt.Errorf("reply id %.40s, want %d", id, n)
	}
	return check(result)
}

// checkQuantity accepts a JSON string holding a hex quantity.
func checkQuantity(result []byte) error {
	if !isQuantity(result) {
		return fmt.Errorf("result is not a quantity: %.200s", result)
	}
	return nil
}

// isQuantity reports a quoted 0x-prefixed run of hex digits.
func isQuantity(v []byte) bool {
	if len(v) < 5 || v[0] != '"' || v[len(v)-1] != '"' || v[1] != '0' || v[2] != 'x' {
		return false
	}
	for _, c := range v[3 : len(v)-1] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// startUpstream starts the fake upstream child (exe upstream) on a free
// port and waits until it answers; the caller stops it.
func (l *loader) startUpstream(ctx context.Context, exe string) (*child, string, error) {
	up, url, err := startChild(ctx, "upstream", true, exe, "upstream", "-listen", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	if err := l.waitReady(ctx, url, up, childReadyTimeout); err != nil {
		up.Stop()
		return nil, "", err
	}
	return up, url, nil
}

// waitReady polls url with single balance calls until one succeeds, c
// exits, or the deadline passes.
func (l *loader) waitReady(ctx context.Context, url string, c *child, timeout time.Duration) error {
	return l.waitServes(ctx, url, c, timeout, l.balance)
}

// waitServes polls url with single calls of kind until one succeeds, c
// exits, or the deadline passes.
func (l *loader) waitServes(ctx context.Context, url string, c *child, timeout time.Duration, kind callKind) error {
	const pollEvery = 100 * time.Millisecond
	deadline := time.Now().Add(timeout)
	var body []byte
	var reply bytes.Buffer
	var lastErr error
	for {
		n := l.seq.Add(1)
		body = kind.request(body[:0], n)
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		lastErr = l.call(callCtx, url, body, &reply, n, kind.check)
		cancel()
		if lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c != nil {
			if done, err := c.Exited(); done {
				return fmt.Errorf("%s exited while starting: %v%s", c.Name, err, c.StderrNote())
			}
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("%s not answering after %v", url, timeout), lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

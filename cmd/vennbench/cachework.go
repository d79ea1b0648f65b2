package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// The cache bench's workload: what an indexer asks while it handles the
// events of a run of settled blocks. Each event is a transfer on one of
// the fake chain's token contracts; to handle it the indexer reads the
// holder's token balance (eth_call balanceOf), the holder's ether balance
// (eth_getBalance) and the contract's code (eth_getCode), all at the
// event's block. Contracts and holders are drawn with a Zipf skew, as a
// few tokens and a few accounts carry most transfers, so a block's events
// share some reads (the code of a contract, a busy holder) and most reads
// are of one event alone.

// workloadSpec fixes a workload: the same spec gives the same calls.
type workloadSpec struct {
	From    uint64 // first block
	Blocks  int    // blocks from From on
	Events  int    // events per block
	Holders int    // accounts the events are drawn from
	Seed    uint64
}

// Skews of the Zipf draws (s > 1: the larger, the more the first few
// carry).
const (
	holderSkew   = 1.2
	contractSkew = 1.5
)

// balanceOfSelector is ERC-20 balanceOf(address).
const balanceOfSelector = "0x70a08231"

// stateCall is one call of the workload.
type stateCall struct {
	// tail is the request after its id: `,"method":…,"params":[…]}`.
	tail []byte
	// want is the call's result, exactly as the upstream sends it.
	want []byte
}

// workload is one indexer's sequence of calls; every indexer replays it.
type workload struct {
	spec     workloadSpec
	calls    []stateCall
	distinct int // distinct calls: the most any cache must ask upstream
}

// holderAddr is the i-th holder: addresses no fake-chain sender or
// contract has.
func holderAddr(i int) string {
	return fmt.Sprintf("0x%08x%032x", uint32(i)*2654435761, i+1)
}

// newWorkload builds the calls of spec and their answers, asked of an
// in-process node of the bench chain with head at least the last block.
func newWorkload(spec workloadSpec, head uint64) (*workload, error) {
	rng := rand.New(rand.NewPCG(spec.Seed, spec.From))
	contracts := fakenode.Contracts()
	holders := rand.NewZipf(rng, holderSkew, 1, uint64(spec.Holders-1))
	tokens := rand.NewZipf(rng, contractSkew, 1, uint64(len(contracts)-1))
	w := &workload{spec: spec}
	for b := spec.From; b < spec.From+uint64(spec.Blocks); b++ {
		block := `"0x` + strconv.FormatUint(b, 16) + `"`
		for range spec.Events {
			c, h := contracts[tokens.Uint64()], holderAddr(int(holders.Uint64()))
			w.calls = append(w.calls,
				stateCall{tail: balanceOfTail(c, h, block)},
				stateCall{tail: callTail("eth_getBalance", `"`+h+`",`+block)},
				stateCall{tail: callTail("eth_getCode", `"`+c+`",`+block)})
		}
	}
	if err := w.expect(head); err != nil {
		return nil, err
	}
	return w, nil
}

// newFillWorkload is n eth_call balanceOf of distinct holders (from the
// holders-th on, which no round's workload reads) at block: n new cache
// entries.
func newFillWorkload(n int, block uint64, holders int, head uint64) (*workload, error) {
	w := &workload{calls: make([]stateCall, n)}
	c, b := fakenode.Contracts()[0], `"0x`+strconv.FormatUint(block, 16)+`"`
	for i := range w.calls {
		w.calls[i].tail = balanceOfTail(c, holderAddr(holders+i), b)
	}
	return w, w.expect(head)
}

// balanceOfTail is eth_call of contract's balanceOf(holder) at block.
func balanceOfTail(contract, holder, block string) []byte {
	return callTail("eth_call", `{"to":"`+contract+`","input":"`+balanceOfSelector+
		"000000000000000000000000"+holder[2:]+`"},`+block)
}

func callTail(method, params string) []byte {
	return []byte(`,"method":"` + method + `","params":[` + params + `]}`)
}

// expect fills every call's answer from an in-process fake node (no
// network): what the upstream child, the same chain, answers.
func (w *workload) expect(head uint64) error {
	node := fakenode.New(fakenode.Options{ChainID: benchChainID, Head: head})
	defer node.Close()
	h := node.Handler()
	seen := map[string][]byte{}
	for i := range w.calls {
		c := &w.calls[i]
		if want, ok := seen[string(c.tail)]; ok {
			c.want = want
			continue
		}
		body := append([]byte(`{"jsonrpc":"2.0","id":1`), c.tail...)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		var got []byte
		err := checkReplyOf(rec.Body.Bytes(), 1, func(result []byte) error {
			got = bytes.Clone(result)
			return nil
		})
		if err != nil {
			return fmt.Errorf("expected answer of %s: %w", c.tail, err)
		}
		c.want = got
		seen[string(c.tail)] = got
	}
	w.distinct = len(seen)
	return nil
}

// request appends call i of the sequence with id n.
func (w *workload) request(b []byte, i int, n uint64) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, w.calls[i%len(w.calls)].tail...)
}

// check accepts only call i's own answer, byte for byte.
func (w *workload) check(reply []byte, i int, n uint64) error {
	c := &w.calls[i%len(w.calls)]
	return checkReplyOf(reply, n, func(result []byte) error {
		if !bytes.Equal(result, c.want) {
			return fmt.Errorf("call %s answered %.100s, want %.100s", bytes.TrimPrefix(c.tail, []byte(",")), result, c.want)
		}
		return nil
	})
}

// indexer is one simulated indexer's pass over the workload: it starts at
// its offset, wraps around, and sends its calls in order through workers
// that each take the next one.
type indexer struct {
	w      *workload
	url    string
	offset int
	next   atomic.Int64
	// limit is how many calls the pass makes (the whole sequence once);
	// 0: as many as a window's duration allows.
	limit int64
}

// newIndexers makes n indexers over w, the i-th starting i/n of the way
// into the sequence and sending to urls[i % len(urls)].
func newIndexers(w *workload, n int, urls []string, once bool) []*indexer {
	out := make([]*indexer, n)
	for i := range out {
		out[i] = &indexer{w: w, url: urls[i%len(urls)], offset: i * len(w.calls) / n}
		if once {
			out[i].limit = int64(len(w.calls))
		}
	}
	return out
}

// runIndexers runs perIndexer workers for each of ixs, each worker with a
// poster of its own from newPoster(url), until every pass is done or d (when
// positive) has passed.
func (l *loader) runIndexers(ctx context.Context, ixs []*indexer, perIndexer int, d time.Duration,
	newPoster func(url string) func() poster) loadResult {
	results := make([]workerResult, len(ixs)*perIndexer)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for k := range results {
		ix := ixs[k/perIndexer]
		wg.Go(func() {
			r := &results[k]
			r.lat = make([]time.Duration, 0, samplesPrealloc)
			p := newPoster(ix.url)()
			defer p.close()
			var body []byte
			var reply bytes.Buffer
			for ctx.Err() == nil {
				t0 := time.Now()
				j := ix.next.Add(1) - 1
				if (ix.limit > 0 && j >= ix.limit) || (d > 0 && !t0.Before(end)) {
					return
				}
				i, n := ix.offset+int(j), l.seq.Add(1)
				body = ix.w.request(body[:0], i, n)
				err := p.post(ctx, body, &reply)
				if err == nil {
					err = ix.w.check(reply.Bytes(), i, n)
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

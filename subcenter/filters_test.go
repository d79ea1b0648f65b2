package subcenter

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// upstream is the router as the filters see it (via): it counts the
// calls that reach it and answers eth_getLogs from blocks it is given, as
// history or a remote would.
type upstream struct {
	calls  atomic.Int64
	mu     sync.Mutex
	blocks map[uint64]*evm.Block // the canonical chain below the window
	asked  []string              // eth_getLogs params
}

func (u *upstream) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	u.calls.Add(1)
	jrpc.NoteOf(ctx).Upstream("up", 1) // as the remotes note each exchange, outside any lock
	u.mu.Lock()
	defer u.mu.Unlock()
	switch req.Method {
	case "eth_getLogs":
		u.asked = append(u.asked, string(req.Params))
		var p []struct {
			From string `json:"fromBlock"`
			To   string `json:"toBlock"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil || len(p) != 1 {
			return nil, &jrpc.Error{Code: jrpc.CodeInvalidParams, Message: "bad params"}
		}
		from, _ := evm.ParseQuantity(p[0].From)
		to, _ := evm.ParseQuantity(p[0].To)
		f := evm.ParseCall("eth_getLogs", req.Params)
		var out jsonList
		for n := from; n <= to; n++ {
			b := u.blocks[n]
			if b == nil {
				return nil, &jrpc.Error{Code: -32000, Message: fmt.Sprintf("no block %d", n)}
			}
			parts, _ := evm.Split(b)
			for _, l := range parts.Logs {
				if f.Filter.Match(l.Address, l.Topics) {
					out.add(l.Raw)
				}
			}
		}
		return out.json(), nil
	case "eth_getBlockByNumber":
		var p []string
		_ = json.Unmarshal(req.Params, &p)
		n, _ := evm.ParseQuantity(p[0])
		if b := u.blocks[n]; b != nil {
			return json.RawMessage(`{"hash":"` + b.Hash + `"}`), nil
		}
		return json.RawMessage("null"), nil
	}
	return nil, &jrpc.Error{Code: -32000, Message: "unexpected call " + req.Method}
}

// replica is one venn's filters, on its own window fed the chain's events.
type replica struct {
	feed *feed
	f    *Filters
	via  *upstream
}

func newReplica(t *testing.T, store FilterStore, pending PendingFeed, cfg FilterConfig) *replica {
	r := &replica{feed: newFeed(t, 32), via: &upstream{blocks: map[uint64]*evm.Block{}}}
	r.feed.w.SetLive(true)
	r.f = NewFilters("test", r.feed.w, store, pending, nil, cfg, nil)
	t.Cleanup(r.f.Stop)
	return r
}

func (r *replica) call(t *testing.T, method, params string) (json.RawMessage, error) {
	t.Helper()
	return r.f.ServeFilter(t.Context(), r.via, &jrpc.Request{ID: json.RawMessage("1"), Method: method, Params: json.RawMessage(params)})
}

func (r *replica) must(t *testing.T, method, params string) json.RawMessage {
	t.Helper()
	res, err := r.call(t, method, params)
	if err != nil {
		t.Fatalf("%s %s: %v", method, params, err)
	}
	return res
}

func (r *replica) newFilter(t *testing.T, method, params string) string {
	t.Helper()
	var id string
	if err := json.Unmarshal(r.must(t, method, params), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

// changes polls id and names what it got: "N" for a log or block hash of
// block N of fork a, "N:fork" for another fork, "-" before it when removed.
func (r *replica) changes(t *testing.T, id string) []string {
	t.Helper()
	return names(t, r.must(t, "eth_getFilterChanges", `["`+id+`"]`))
}

func names(t *testing.T, res json.RawMessage) []string {
	t.Helper()
	var items []json.RawMessage
	if err := json.Unmarshal(res, &items); err != nil {
		t.Fatalf("%s: %v", res, err)
	}
	out := []string{}
	for _, it := range items {
		var l struct {
			BlockHash string `json:"blockHash"`
			Removed   bool   `json:"removed"`
		}
		if it[0] == '"' {
			_ = json.Unmarshal(it, &l.BlockHash)
		} else if err := json.Unmarshal(it, &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, nameOf(l.BlockHash, l.Removed))
	}
	return out
}

func nameOf(hash string, removed bool) string {
	for _, fork := range []string{"a", "b", "c"} {
		for n := uint64(0); n < 200; n++ {
			if blockHash(fork, n) == hash {
				s := fmt.Sprint(n)
				if fork != "a" {
					s += ":" + fork
				}
				if removed {
					s = "-" + s
				}
				return s
			}
		}
	}
	return "?" + hash
}

// stores runs a test on each FilterStore, one replica or two on it.
var stores = []struct {
	name string
	new  func(t *testing.T) (FilterStore, PendingFeed)
}{
	{"memory", func(*testing.T) (FilterStore, PendingFeed) { return NewMemoryFilters(), NewMemoryPending() }},
	{"redis", func(t *testing.T) (FilterStore, PendingFeed) {
		rs := startRedisServer(t)
		return redisStores(t, rs.rdb)
	}},
}

// TestFilterChangesFromTheWindow: log and block filters get what came
// after them, once, the orphaned blocks' logs again with removed: true
// before the new branch's, and the window answers every poll: no
// upstream call.
func TestFilterChangesFromTheWindow(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store, pending := st.new(t)
			r := newReplica(t, store, pending, FilterConfig{})
			r.feed.extend("a", 1, 5, "a")
			all := r.newFilter(t, "eth_newFilter", `[{}]`)
			odd := r.newFilter(t, "eth_newFilter", `[{"topics":["`+topic(1)+`"]}]`)
			blocks := r.newFilter(t, "eth_newBlockFilter", `[]`)
			if got := r.changes(t, all); len(got) != 0 {
				t.Fatalf("a new filter has %v", got)
			}
			r.feed.extend("a", 6, 9, "a")
			for _, tt := range []struct {
				id   string
				want []string
			}{
				{all, []string{"6", "7", "8", "9"}},
				{odd, []string{"7", "9"}},
				{blocks, []string{"6", "7", "8", "9"}},
				{all, nil}, // delivered once
			} {
				if got := r.changes(t, tt.id); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
					t.Fatalf("changes = %v, want %v", got, tt.want)
				}
			}
			// 8 and 9 leave for b/8..b/10.
			r.feed.apply([]headstore.Ref{{Number: 9, Hash: blockHash("a", 9)}, {Number: 8, Hash: blockHash("a", 8)}},
				block("b", 8, "a"), block("b", 9, "b"), block("b", 10, "b"))
			if got, want := r.changes(t, all), []string{"-8", "-9", "8:b", "9:b", "10:b"}; !slices.Equal(got, want) {
				t.Fatalf("log filter after the reorg = %v, want %v", got, want)
			}
			if got, want := r.changes(t, odd), []string{"-9", "9:b"}; !slices.Equal(got, want) {
				t.Fatalf("topic filter after the reorg = %v, want %v", got, want)
			}
			if got, want := r.changes(t, blocks), []string{"8:b", "9:b", "10:b"}; !slices.Equal(got, want) {
				t.Fatalf("block filter after the reorg = %v, want %v", got, want)
			}
			if n := r.via.calls.Load(); n != 0 {
				t.Fatalf("polls answered from the window made %d upstream calls", n)
			}
		})
	}
}

// TestFilterMadeOnOneReplicaPolledOnAnother: two replicas on one Redis,
// each following the chain: a filter made through one is polled through
// the other, and a reorg seen between polls on different replicas is
// corrected there.
func TestFilterMadeOnOneReplicaPolledOnAnother(t *testing.T) {
	rs := startRedisServer(t)
	r1 := newRedisReplica(t, rs.rdb, FilterConfig{})
	r2 := newRedisReplica(t, rs.rdb, FilterConfig{})
	both := func(dropped []headstore.Ref, added ...*evm.Block) {
		r1.feed.apply(dropped, added...)
		r2.feed.apply(dropped, added...)
	}
	for n := uint64(1); n <= 4; n++ {
		both(nil, block("a", n, "a"))
	}
	id := r1.newFilter(t, "eth_newFilter", `[{}]`)
	if len(id) != 34 || !strings.HasPrefix(id, "0x") {
		t.Logf("id %s is geth-shaped but short (leading zeros trimmed, as geth does)", id)
	}
	both(nil, block("a", 5, "a"))
	both(nil, block("a", 6, "a"))
	if got, want := r2.changes(t, id), []string{"5", "6"}; !slices.Equal(got, want) {
		t.Fatalf("polled on replica 2: %v, want %v", got, want)
	}
	both([]headstore.Ref{{Number: 6, Hash: blockHash("a", 6)}}, block("b", 6, "a"), block("b", 7, "b"))
	if got, want := r1.changes(t, id), []string{"-6", "6:b", "7:b"}; !slices.Equal(got, want) {
		t.Fatalf("polled on replica 1 after the reorg: %v, want %v", got, want)
	}
	if got := r2.changes(t, id); len(got) != 0 {
		t.Fatalf("polled again on replica 2: %v", got)
	}
	if res := r2.must(t, "eth_uninstallFilter", `["`+id+`"]`); string(res) != "true" {
		t.Fatalf("uninstall on replica 2 = %s", res)
	}
	if _, err := r1.call(t, "eth_getFilterChanges", `["`+id+`"]`); !isRPCError(err, -32000, "filter not found") {
		t.Fatalf("uninstalled filter on replica 1: %v", err)
	}
}

// TestConcurrentPollsDeliverEachLogOnce: many polls of one filter at once,
// through two replicas, while the chain grows and reorgs: every log of the
// final chain is delivered once, every removed log once after its log,
// and nothing is lost.
func TestConcurrentPollsDeliverEachLogOnce(t *testing.T) {
	rs := startRedisServer(t)
	r1 := newRedisReplica(t, rs.rdb, FilterConfig{})
	r2 := newRedisReplica(t, rs.rdb, FilterConfig{})
	var polls atomic.Int64
	both := func(dropped []headstore.Ref, added ...*evm.Block) {
		t.Helper()
		// Each change lands among polls: two more end before the next.
		want := polls.Load() + 2
		r1.feed.apply(dropped, added...)
		r2.feed.apply(dropped, added...)
		deadline := time.Now().Add(10 * time.Second)
		for polls.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("the polls stopped at %d, want %d", polls.Load(), want)
			}
			runtime.Gosched()
		}
	}
	r1.feed.apply(nil, block("a", 1, "a"))
	r2.feed.apply(nil, block("a", 1, "a"))
	id := r1.newFilter(t, "eth_newFilter", `[{}]`)

	var (
		mu  sync.Mutex
		got []string
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		r := []*replica{r1, r2}[i%2]
		wg.Go(func() {
			for {
				res, err := r.f.ServeFilter(context.Background(), r.via,
					&jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getFilterChanges", Params: json.RawMessage(`["` + id + `"]`)})
				if err != nil {
					t.Errorf("poll: %v", err)
					return
				}
				mu.Lock()
				got = append(got, names(t, res)...)
				mu.Unlock()
				polls.Add(1)
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	// a/2..a/30, with b replacing a/20..a/25 on the way.
	for n := uint64(2); n <= 25; n++ {
		both(nil, block("a", n, "a"))
	}
	var dropped []headstore.Ref
	for n := uint64(25); n >= 20; n-- {
		dropped = append(dropped, headstore.Ref{Number: n, Hash: blockHash("a", n)})
	}
	both(dropped, block("b", 20, "a"))
	for n := uint64(21); n <= 30; n++ {
		both(nil, block("b", n, "b"))
	}
	close(done)
	wg.Wait()
	// A last poll takes whatever the racing ones left.
	got = append(got, r2.changes(t, id)...)

	// Each log of a/2..a/25 and b/20..b/30 once; each of a/20..a/25
	// removed once if it was delivered.
	// (The answers of racing polls are collected in the order they
	// return, not the order their cursors moved: only counts compare.)
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s delivered %d times: %v", k, n, got)
		}
	}
	for n := 2; n <= 19; n++ {
		if seen[fmt.Sprint(n)] != 1 {
			t.Fatalf("log of a/%d lost: %v", n, got)
		}
	}
	for n := 20; n <= 30; n++ {
		if seen[fmt.Sprintf("%d:b", n)] != 1 {
			t.Fatalf("log of b/%d lost: %v", n, got)
		}
	}
	for n := 20; n <= 25; n++ {
		if seen[fmt.Sprint(n)] != seen[fmt.Sprintf("-%d", n)] {
			t.Fatalf("a/%d delivered %d times, removed %d times: %v", n, seen[fmt.Sprint(n)], seen[fmt.Sprintf("-%d", n)], got)
		}
	}
}

// TestFilterBehindTheWindow: a filter polled after the window moved past
// its cursor gets the blocks below the window through the router's
// eth_getLogs (history or the remotes), then the window's, in order.
func TestFilterBehindTheWindow(t *testing.T) {
	r := newReplica(t, NewMemoryFilters(), NewMemoryPending(), FilterConfig{})
	r.feed.extend("a", 1, 5, "a")
	id := r.newFilter(t, "eth_newFilter", `[{"address":"`+addr(1)+`"}]`)
	blocks := r.newFilter(t, "eth_newBlockFilter", `[]`)
	r.feed.extend("a", 6, 60, "a") // the window keeps 29..60
	for n := uint64(1); n <= 60; n++ {
		r.via.blocks[n] = block("a", n, "a")
	}
	var want []string
	for n := 6; n <= 60; n++ {
		if n%3 == 1 {
			want = append(want, fmt.Sprint(n))
		}
	}
	if got := r.changes(t, id); !slices.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if len(r.via.asked) != 1 || !strings.Contains(r.via.asked[0], `"fromBlock":"0x6"`) || !strings.Contains(r.via.asked[0], `"toBlock":"0x1c"`) ||
		!strings.Contains(r.via.asked[0], addr(1)) {
		t.Fatalf("asked upstream %v, want one eth_getLogs of 6..28 for the filter's address", r.via.asked)
	}
	var wantBlocks []string
	for n := 6; n <= 60; n++ {
		wantBlocks = append(wantBlocks, fmt.Sprint(n))
	}
	if got := r.changes(t, blocks); !slices.Equal(got, wantBlocks) {
		t.Fatalf("block filter = %v, want %v", got, wantBlocks)
	}
	// A range the router refuses (getlogs_limits) is refused whole.
	id = r.newFilter(t, "eth_newFilter", `[{}]`)
	r.feed.extend("a", 61, 100, "a")
	r.via.blocks = map[uint64]*evm.Block{} // the upstream lacks them: it errs
	if _, err := r.call(t, "eth_getFilterChanges", `["`+id+`"]`); err == nil {
		t.Fatal("a poll whose range below the window failed answered")
	}
}

// TestBlockFilterGapNoted: a block filter far behind reads the hashes
// below the window several at once; each read's upstream exchange is
// noted in the poll's note (for its diagnostic headers and the request
// log) without the reads writing it at once (go test -race).
func TestBlockFilterGapNoted(t *testing.T) {
	r := newReplica(t, NewMemoryFilters(), NewMemoryPending(), FilterConfig{})
	r.feed.extend("a", 1, 5, "a")
	id := r.newFilter(t, "eth_newBlockFilter", `[]`)
	r.feed.extend("a", 6, 60, "a") // the window keeps 29..60
	for n := uint64(1); n <= 60; n++ {
		r.via.blocks[n] = block("a", n, "a")
	}
	note := &jrpc.Note{}
	res, err := r.f.ServeFilter(jrpc.WithNote(t.Context(), note), r.via,
		&jrpc.Request{ID: json.RawMessage("1"), Method: "eth_getFilterChanges", Params: json.RawMessage(`["` + id + `"]`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, res); len(got) != 55 || got[0] != "6" || got[54] != "60" {
		t.Fatalf("changes = %v, want 6..60", got)
	}
	if note.Attempts != 23 || note.Remote != "up" {
		t.Fatalf("note = %+v, want 23 attempts (blocks 6..28) from up", note)
	}
}

// TestFilterErrors: geth's answers to bad ids and arguments, the caps,
// and a filter store that does not answer.
func TestFilterErrors(t *testing.T) {
	r := newReplica(t, NewMemoryFilters(), NewMemoryPending(), FilterConfig{MaxPerClient: 2, MaxPerChain: 3})
	r.feed.extend("a", 1, 3, "a")
	tests := []struct {
		method, params string
		code           int
		msg            string
	}{
		{"eth_getFilterChanges", `["0x1234"]`, -32000, "filter not found"},
		{"eth_getFilterLogs", `["0x1234"]`, -32000, "filter not found"},
		{"eth_getFilterChanges", `[]`, jrpc.CodeInvalidParams, "missing value for required argument 0"},
		{"eth_getFilterChanges", `[1]`, jrpc.CodeInvalidParams, "invalid argument 0: json: cannot unmarshal number into Go value of type rpc.ID"},
		{"eth_newBlockFilter", `[1]`, jrpc.CodeInvalidParams, "too many arguments, want at most 0"},
		{"eth_newFilter", `[]`, jrpc.CodeInvalidParams, "missing value for required argument 0"},
		{"eth_newFilter", `[{"fromBlock":"pending"}]`, jrpc.CodeInvalidParams, "pending logs are not supported"},
		{"eth_newFilter", `[{"topics":[null,null,null,null,null]}]`, jrpc.CodeInvalidParams, "exceed max topics"},
	}
	for _, tt := range tests {
		if _, err := r.call(t, tt.method, tt.params); !isRPCError(err, tt.code, tt.msg) {
			t.Errorf("%s %s: %v, want %d %q", tt.method, tt.params, err, tt.code, tt.msg)
		}
	}
	if res := r.must(t, "eth_uninstallFilter", `["0x1234"]`); string(res) != "false" {
		t.Errorf("uninstall of no filter = %s", res)
	}
	// Caps: two for this client, three for the chain.
	a := r.newFilter(t, "eth_newBlockFilter", `[]`)
	r.newFilter(t, "eth_newBlockFilter", `[]`)
	if _, err := r.call(t, "eth_newBlockFilter", `[]`); !isRPCError(err, jrpc.CodeLimitExceeded, "filters.max_per_client is 2") {
		t.Errorf("third filter of a client: %v", err)
	}
	r.must(t, "eth_uninstallFilter", `["`+a+`"]`)
	r.newFilter(t, "eth_newBlockFilter", `[]`)
	// The chain's cap, on both stores: the third filter of a chain that
	// holds two, whoever asks.
	for _, st := range stores {
		store, pending := st.new(t)
		c := newReplica(t, store, pending, FilterConfig{MaxPerClient: 5, MaxPerChain: 2})
		c.feed.extend("a", 1, 3, "a")
		c.newFilter(t, "eth_newBlockFilter", `[]`)
		c.newFilter(t, "eth_newFilter", `[{}]`)
		if _, err := c.call(t, "eth_newBlockFilter", `[]`); !isRPCError(err, jrpc.CodeLimitExceeded, "chain test holds 2, filters.max_per_chain is 2") {
			t.Errorf("%s: third filter of a chain capped at two: %v", st.name, err)
		}
	}

	// A store that does not answer: a clear error, no detail.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	down := newRedisReplica(t, rdb, FilterConfig{})
	down.feed.extend("a", 1, 3, "a")
	for _, m := range []string{"eth_newBlockFilter", "eth_getFilterChanges"} {
		params := `[]`
		if m == "eth_getFilterChanges" {
			params = `["0x1234"]`
		}
		_, err := down.call(t, m, params)
		if !isRPCError(err, jrpc.CodeInternal, "filter store does not answer") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s with Redis down: %v", m, err)
		}
	}
}

// TestFilterLostWithRedis: Redis restarts empty; the filter answers
// "filter not found", which clients meet by making a new one, and never
// changes it did not see.
func TestFilterLostWithRedis(t *testing.T) {
	rs := startRedisServer(t)
	r := newRedisReplica(t, rs.rdb, FilterConfig{})
	r.feed.extend("a", 1, 3, "a")
	id := r.newFilter(t, "eth_newFilter", `[{}]`)
	rs.restart()
	r.feed.extend("a", 4, 5, "a")
	if _, err := r.call(t, "eth_getFilterChanges", `["`+id+`"]`); !isRPCError(err, -32000, "filter not found") {
		t.Fatalf("filter lost with Redis: %v", err)
	}
}

// TestFilterExpires: a filter not polled for the timeout is gone; one
// polled stays.
func TestFilterExpires(t *testing.T) {
	s := NewMemoryFilters()
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return now }
	r := newReplica(t, s, NewMemoryPending(), FilterConfig{Timeout: time.Minute})
	r.feed.extend("a", 1, 3, "a")
	idle := r.newFilter(t, "eth_newBlockFilter", `[]`)
	polled := r.newFilter(t, "eth_newBlockFilter", `[]`)
	now = now.Add(40 * time.Second)
	r.changes(t, polled)
	now = now.Add(40 * time.Second)
	if _, err := r.call(t, "eth_getFilterChanges", `["`+idle+`"]`); !isRPCError(err, -32000, "filter not found") {
		t.Fatalf("idle filter: %v", err)
	}
	r.changes(t, polled)

	// On Redis the deadline is the key's TTL.
	rs := startRedisServer(t)
	rr := newRedisReplica(t, rs.rdb, FilterConfig{Timeout: time.Minute})
	rr.feed.extend("a", 1, 3, "a")
	id := rr.newFilter(t, "eth_newBlockFilter", `[]`)
	ttl, err := rs.rdb.PTTL(t.Context(), "venn:{test}:f:"+id).Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("filter TTL %v, %v; want about a minute", ttl, err)
	}
}

// TestPendingFilterFeed: a pending filter gets what the feed took after
// it was made, once, on either replica.
func TestPendingFilterFeed(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store, pending := st.new(t)
			r := newReplica(t, store, pending, FilterConfig{})
			r.feed.extend("a", 1, 3, "a")
			ctx := t.Context()
			add := func(hashes ...string) {
				t.Helper()
				var items [][]byte
				for _, h := range hashes {
					items = append(items, []byte(`"`+h+`"`))
				}
				keys := make([]string, len(items))
				for i, it := range items {
					keys[i] = string(it)
				}
				if err := pending.Add(ctx, false, keys, items); err != nil {
					t.Fatal(err)
				}
			}
			add(hash32("before"))
			st := &FilterState{Kind: filterPending, Owner: "-"}
			tail, err := pending.Tail(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			st.Pos.Pending = tail
			if err := store.Create(ctx, "0xabc", st, time.Minute, 10, 10); err != nil {
				t.Fatal(err)
			}
			add(hash32("one"), hash32("two"), hash32("one"))
			res := r.must(t, "eth_getFilterChanges", `["0xabc"]`)
			if want := `["` + hash32("one") + `","` + hash32("two") + `"]`; string(res) != want {
				t.Fatalf("pending changes = %s, want %s", res, want)
			}
			if res := r.must(t, "eth_getFilterChanges", `["0xabc"]`); string(res) != "[]" {
				t.Fatalf("again = %s", res)
			}
		})
	}
}

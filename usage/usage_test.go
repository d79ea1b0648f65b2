package usage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/usage"
)

const (
	keyA = "key-a-0123456789abcdef"
	keyB = "key-b-0123456789abcdef"
)

var edgeConfig = edge.Config{
	Auth:    edge.AuthConfig{Keys: []edge.APIKey{{Name: "a", Key: keyA, Tenant: "team-a"}, {Name: "solo", Key: keyB}}},
	Tenants: []edge.Tenant{{Name: "team-a"}},
}

// replica is one venn replica's JSON-RPC server behind an edge that
// records usage into rec.
func replica(t *testing.T, rec *usage.Recorder) string {
	t.Helper()
	e := edge.New(edgeConfig, edge.Options{Usage: rec})
	s := jrpc.NewServer(jrpc.Options{Gate: e})
	s.Handle("eth", jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		jrpc.NoteOf(ctx).Answered("remotes")
		if req.Method == "eth_call" {
			return nil, &jrpc.Error{Code: 3, Message: "execution reverted"}
		}
		return json.RawMessage(`"0x` + strings.Repeat("ab", len(req.Method)) + `"`), nil
	}))
	ts := httptest.NewServer(e.Wrap(s.Handler()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		ts.Close()
	})
	return ts.URL + "/eth"
}

// sent is what the test sent and was told, to compare with the table.
type sent struct {
	calls, credits, errors, bytes int64
}

func post(t *testing.T, url, key, body string, tally *sent, items int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	credits, err := edge.ParseCredits(resp.Header.Get("X-Venn-Credits"))
	if err != nil {
		t.Fatal(err)
	}
	tally.calls += int64(items)
	tally.credits += credits.Call
	tally.errors += int64(strings.Count(string(b), `"error"`))
	n := int64(len(b))
	if items > 1 {
		n -= int64(2 + items - 1) // a batch's brackets and commas are no call's
	}
	tally.bytes += n
}

func call(method string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":[]}`
}

func sum(rows []usage.Row, tenant string) sent {
	var s sent
	for _, r := range rows {
		if r.Tenant == tenant {
			s.calls += r.Calls
			s.credits += r.Credits
			s.errors += r.Errors
			s.bytes += r.BytesOut
		}
	}
	return s
}

// TestUsageAddsUp: the rows two replicas write add up exactly to the
// calls made, the credits the answers said, the errors and the bytes.
func TestUsageAddsUp(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	recs := []*usage.Recorder{usage.NewRecorder(usage.RecorderOptions{}), usage.NewRecorder(usage.RecorderOptions{})}
	urls := []string{replica(t, recs[0]), replica(t, recs[1])}
	var teamA, solo sent
	for i := range 20 {
		r := i % 2
		post(t, urls[r], keyA, call("eth_blockNumber"), &teamA, 1)
		post(t, urls[r], keyA, call("eth_call"), &teamA, 1)
		post(t, urls[1-r], keyA, "["+call("eth_getLogs")+","+call("eth_chainId")+","+call("eth_madeUp")+"]", &teamA, 3)
		post(t, urls[r], keyB, call("eth_getBalance"), &solo, 1)
		if i == 10 { // a flush in the middle: rows are added to, not replaced
			for _, rec := range recs {
				if err := usage.NewWriter(pool, rec, usage.WriterOptions{}).Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, rec := range recs {
		if err := usage.NewWriter(pool, rec, usage.WriterOptions{}).Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := usage.Query(ctx, pool, "", time.Now().AddDate(0, 0, -1), time.Now().AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(rows, "team-a"); got != teamA {
		t.Errorf("team-a's rows add up to %+v, the calls to %+v", got, teamA)
	}
	if got := sum(rows, "solo"); got != solo {
		t.Errorf("the key without a tenant: rows %+v, calls %+v", got, solo)
	}
	if teamA.credits == 0 || teamA.errors != 20 {
		t.Errorf("the test's own tally looks wrong: %+v", teamA)
	}
	methods := map[string]int64{}
	for _, r := range rows {
		if r.Tenant == "team-a" {
			methods[r.Method] += r.Calls
		}
	}
	if methods["eth_blockNumber"] != 20 || methods["other"] != 20 || len(methods) != 5 {
		t.Errorf("calls by method: %v", methods)
	}
}

// TestUsagePostgresDown: while Postgres is down the rows are kept and
// written once it is back, none lost; with the buffer full, the calls
// that do not fit are dropped and counted.
func TestUsagePostgresDown(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	reg := prometheus.NewRegistry()
	rec := usage.NewRecorder(usage.RecorderOptions{MaxRows: 3, Registerer: reg})
	w := usage.NewWriter(pool, rec, usage.WriterOptions{})
	url := replica(t, rec)
	var made sent
	post(t, url, keyA, call("eth_blockNumber"), &made, 1)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	proxy.Stop()
	for range 5 {
		post(t, url, keyA, call("eth_blockNumber"), &made, 1)
		post(t, url, keyA, call("eth_chainId"), &made, 1)
	}
	if err := w.Flush(ctx); err == nil {
		t.Fatal("a flush with Postgres down succeeded")
	}
	post(t, url, keyA, call("eth_getLogs"), &made, 1) // the third row: fits
	var dropped sent
	post(t, url, keyA, call("eth_gasPrice"), &dropped, 1) // a fourth: does not
	if got := testutil.ToFloat64(counter(t, reg, "venn_usage_dropped_calls_total")); got != 1 {
		t.Errorf("dropped calls counted %v, want 1", got)
	}
	if got := len(rec.Pending()); got != 3 {
		t.Errorf("%d rows held, want the bound of 3", got)
	}

	proxy.Start()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := usage.Query(ctx, pool, "team-a", time.Now().AddDate(0, 0, -1), time.Now().AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(rows, "team-a"); got != made {
		t.Errorf("after the outage the rows add up to %+v, the calls kept to %+v", got, made)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("no %s", name)
	return nil
}

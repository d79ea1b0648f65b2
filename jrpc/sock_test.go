package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/testkit"
)

// notifierServer serves eth_subscribe by handing its connection's Notifier
// to the test once the reply is written.
func notifierServer(t *testing.T, lim Limits) (*testServer, chan Notifier) {
	t.Helper()
	notifiers := make(chan Notifier, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method != "eth_subscribe" {
			return json.RawMessage(`"pong"`), nil
		}
		n, _ := NotifierFromContext(ctx)
		if !AfterReply(ctx, func() { notifiers <- n }) {
			return nil, errors.New("no reply to hold notifications for")
		}
		return json.RawMessage(`"0x1"`), nil
	})
	return newTestServer(t, Options{Limits: lim}, h), notifiers
}

func subscribed(t *testing.T, c *websocket.Conn, notifiers chan Notifier) Notifier {
	t.Helper()
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"0x1"}`; got != want {
		t.Fatalf("reply: got %s, want %s", got, want)
	}
	return <-notifiers
}

func subscriptionJSON(id, result string) string {
	return `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"` + id + `","result":` + result + `}}`
}

// A batch written in one go arrives as one WebSocket message per
// notification, in order, each geth's exact JSON; a call answered between
// batches comes between them.
func TestWSNotifySubscriptionsBatch(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)

	first := []SubscriptionNote{
		{ID: "0x1", Result: json.RawMessage(`{"number":"0x1","extra":"é\u2028"}`)},
		{ID: "0xab", Result: json.RawMessage(`"0x2"`)},
		{ID: "0x1", Result: json.RawMessage(`[]`)},
	}
	ok, err := n.TryNotifySubscriptions(first)
	if !ok || err != nil {
		t.Fatalf("TryNotifySubscriptions = %v, %v; want true, nil", ok, err)
	}
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	var want []string
	for _, nt := range first {
		want = append(want, subscriptionJSON(nt.ID, string(nt.Result)))
	}
	for i, w := range want {
		if got := testkit.WSRead(t, c); got != w {
			t.Fatalf("message %d: got %s, want %s", i, got, w)
		}
	}
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":2,"result":"pong"}`; got != want {
		t.Fatalf("answer: got %s, want %s", got, want)
	}
	if err := n.NotifySubscriptions(context.Background(), first[1:]); err != nil {
		t.Fatal(err)
	}
	for i, w := range want[1:] {
		if got := testkit.WSRead(t, c); got != w {
			t.Fatalf("blocking batch, message %d: got %s, want %s", i, got, w)
		}
	}
}

// bigNotes is a batch of notifications of about 64 KiB each, numbered from
// seq.
func bigNotes(seq, count int) []SubscriptionNote {
	pad := strings.Repeat("f", 64<<10)
	notes := make([]SubscriptionNote, count)
	for i := range notes {
		notes[i] = SubscriptionNote{ID: "0x1", Result: json.RawMessage(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq+i, pad))}
	}
	return notes
}

// A client that does not read: a try never waits for it. The socket takes
// what it can, the rest goes in the background, and until it has, another
// try finds the turn taken and writes nothing. Once the client reads, it
// gets every notification once, in order, whole.
func TestWSTryNotifyBehindAClientThatDoesNotRead(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)

	const batch = 16 // 1 MiB a try; loopback buffers hold a few
	sent := 0
	for tries := 0; ; tries++ {
		if tries == 256 {
			t.Fatal("256 MiB written to a client that does not read, and every try went through")
		}
		start := time.Now()
		ok, err := n.TryNotifySubscriptions(bigNotes(sent, batch))
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a try took %v: it waited for the client", d)
		}
		if !ok {
			break // the turn is the background write's
		}
		sent += batch
	}
	if sent == 0 {
		t.Fatal("the first try wrote nothing")
	}

	// The client reads; the background write ends, and a try gets through
	// again: its notification comes last.
	got := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			_, b, err := c.Read(context.Background())
			if err != nil {
				got <- err
				return
			}
			var m struct {
				Params struct {
					Result struct{ Seq int }
				}
			}
			if err := json.Unmarshal(b, &m); err != nil {
				got <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			if m.Params.Result.Seq != i {
				got <- fmt.Errorf("message %d has seq %d", i, m.Params.Result.Seq)
				return
			}
			if i == sent {
				got <- nil
				return
			}
		}
	}()
	testkit.WaitFor(t, 10*time.Second, "a try to get through once the client reads", func() bool {
		ok, err := n.TryNotifySubscriptions(bigNotes(sent, 1))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not get every notification")
	}
}

// What the network did not take goes out within ws_write_timeout, or the
// connection closes.
func TestWSTryNotifyBackgroundWriteTimesOut(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{WSWriteTimeout: 200 * time.Millisecond})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)
	for tries := 0; ; tries++ {
		if tries == 256 {
			t.Fatal("every try went through to a client that does not read")
		}
		ok, err := n.TryNotifySubscriptions(bigNotes(0, 16))
		if err != nil || !ok {
			break
		}
	}
	select {
	case <-n.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a client that does not read stayed open past ws_write_timeout")
	}
}

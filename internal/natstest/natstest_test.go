package natstest

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A client connected to the server finds JetStream, survives a crash and
// a restart of the server (reconnecting to the same port), and finds the
// stream it made still there: the storage folder outlives the process.
func TestServerRestartsWithItsStorage(t *testing.T) {
	s := Start(t, Options{})
	reconnected := make(chan struct{}, 1)
	nc := s.Connect(natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond),
		natsgo.ReconnectHandler(func(*natsgo.Conn) { reconnected <- struct{}{} }))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("one")); err != nil {
		t.Fatal(err)
	}

	s.Kill()
	if s.Running() {
		t.Fatal("still running after Kill")
	}
	s.Restart()
	select {
	case <-reconnected:
	case <-ctx.Done():
		t.Fatal("the client did not reconnect after the restart")
	}
	st, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after the restart, want 1", info.State.Msgs)
	}
}

// A server that requires a token refuses a client without it, and
// Connect passes it.
func TestServerWithToken(t *testing.T) {
	s := Start(t, Options{Token: "s3cret", NoJetStream: true})
	if _, err := natsgo.Connect(s.URL(), natsgo.NoReconnect()); err == nil {
		t.Fatal("connected without the token")
	}
	nc := s.Connect()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

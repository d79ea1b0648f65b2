package wire

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// gateConn is the transport's network connection with the end of it held
// back from the reader: once hold is set, a Read that meets the end (the
// remote's FIN) tells the test (eof) and returns only after the
// connection was written to or closed, or the test opened it. That is a
// busy machine on which the reader runs late, made certain: the next call
// is written after the remote closed the connection and before the reader
// knew.
type gateConn struct {
	net.Conn
	hold      atomic.Bool
	failWrite atomic.Bool // writes fail, writing nothing
	eof       chan struct{}
	eofOnce   sync.Once
	release   chan struct{}
	relOnce   sync.Once
}

func (g *gateConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if err != nil && g.hold.Load() {
		g.eofOnce.Do(func() { close(g.eof) })
		<-g.release
	}
	return n, err
}

func (g *gateConn) Write(p []byte) (int, error) {
	if g.failWrite.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
	}
	n, err := g.Conn.Write(p)
	select {
	case <-g.eof:
		g.open()
	default:
	}
	return n, err
}

func (g *gateConn) Close() error {
	g.open()
	return g.Conn.Close()
}

func (g *gateConn) open() { g.relOnce.Do(func() { close(g.release) }) }

// gateDials makes tr's connections gateConns, and returns them as they
// are dialled.
func gateDials(tr *wsTransport) func() []*gateConn {
	ht := tr.dialOpts.HTTPClient.Transport.(*http.Transport)
	dial := ht.DialContext
	var (
		mu    sync.Mutex
		conns []*gateConn
	)
	ht.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		g := &gateConn{Conn: c, eof: make(chan struct{}), release: make(chan struct{})}
		mu.Lock()
		conns = append(conns, g)
		mu.Unlock()
		return g, nil
	}
	return func() []*gateConn {
		mu.Lock()
		defer mu.Unlock()
		return append([]*gateConn(nil), conns...)
	}
}

// rsNode is a fake node and a WebSocket transport to it whose connections
// are gated, with one call made to open the first.
func rsNode(t *testing.T) (*fakenode.Node, *wsTransport, func() []*gateConn) {
	t.Helper()
	n := fakenode.Start(t, fakenode.Options{ChainID: 1})
	tr := tpNewWS(t, n.WSURL(), 0)
	conns := gateDials(tr)
	if _, _, err := tr.Call(context.Background(), "eth_chainId", nil); err != nil {
		t.Fatalf("first call: %v", err)
	}
	return n, tr, conns
}

// rsTx is a raw transaction the fake node takes; it answers a second send
// of it with "already known".
const rsTx = `["0x02f86b0180843b9aca00"]`

// A call that its connection's loss kept from reaching the remote is sent
// again on a new connection, and answered, even a write: the remote never
// saw it, so it cannot be done twice.
func TestWSTransportResendsUnsent(t *testing.T) {
	tests := []struct {
		name string
		// cut breaks the open connection before the call is made.
		cut func(t *testing.T, n *fakenode.Node, g *gateConn)
	}{
		{
			// The remote restarts while the connection is idle; the
			// reader has not run since its FIN came.
			name: "closed by the remote, the reader not told",
			cut: func(t *testing.T, n *fakenode.Node, g *gateConn) {
				g.hold.Store(true)
				n.SetDown(true)
				n.SetDown(false)
				<-g.eof
			},
		},
		{
			name: "write fails",
			cut: func(t *testing.T, n *fakenode.Node, g *gateConn) {
				g.failWrite.Store(true)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpNoLeaks(t)
			n, tr, conns := rsNode(t)
			tt.cut(t, n, conns()[0])

			got, _, err := tr.Call(context.Background(), "eth_sendRawTransaction", json.RawMessage(rsTx))
			if err != nil {
				t.Fatalf("call on a connection cut before the call was written: %v; want it answered on a new one", err)
			}
			if len(got) < 3 || got[1] != '0' || got[2] != 'x' {
				t.Errorf("result %s, want the transaction's hash", got)
			}
			if c := n.Calls("eth_sendRawTransaction"); c != 1 {
				t.Errorf("the node got the transaction %d times, want once", c)
			}
			if c := len(conns()); c != 2 {
				t.Errorf("%d connections, want 2", c)
			}
		})
	}
}

// A read on a connection that was quiet is looked at before it is written,
// as a write always is: when the remote closed the connection meanwhile (an
// idle timeout, a restart), the read is answered on a new connection, and
// the remote is not blamed for a call it never saw.
func TestWSTransportQuietReadLooksFirst(t *testing.T) {
	tpNoLeaks(t)
	n, tr, conns := rsNode(t)
	tr.peekQuiet = 0 // every connection has been quiet long enough
	g := conns()[0]
	g.hold.Store(true)
	n.SetDown(true)
	n.SetDown(false)
	<-g.eof

	got, _, err := tr.Call(context.Background(), "eth_chainId", nil)
	if err != nil {
		t.Fatalf("read on a quiet connection the remote closed: %v; want it answered on a new one", err)
	}
	if string(got) != `"0x1"` {
		t.Errorf("result %s, want \"0x1\"", got)
	}
	if c := n.Calls("eth_chainId"); c != 2 {
		t.Errorf("the node got eth_chainId %d times, want twice (the first call's, this one's)", c)
	}
	if c := len(conns()); c != 2 {
		t.Errorf("%d connections, want 2", c)
	}
}

// A call written before its connection was lost is not sent again by the
// transport, even when the remote is back at once: the remote may have
// acted on it.
func TestWSTransportNeverResendsWritten(t *testing.T) {
	tpNoLeaks(t)
	n, tr, conns := rsNode(t)
	g := conns()[0]
	g.hold.Store(true) // the reader learns of the cut once the node is back
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	var first atomic.Bool
	n.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_sendRawTransaction" && first.CompareAndSwap(false, true) {
			arrived <- struct{}{}
			<-release // the node dies before it answers
		}
		return nil, nil, false
	})
	t.Cleanup(func() { close(release) })
	go func() {
		<-arrived
		n.SetDown(true)
		n.SetDown(false)
		g.open()
	}()

	_, _, err := tr.Call(context.Background(), "eth_sendRawTransaction", json.RawMessage(rsTx))
	if !errors.Is(err, ErrTransport) {
		t.Errorf("call whose connection was lost after it was written: %v; want ErrTransport", err)
	}
	if c := n.Calls("eth_sendRawTransaction"); c != 1 {
		t.Errorf("the node got the transaction %d times, want once", c)
	}
}

// A call that joined a dial which began while the remote was down, and was
// refused, dials once more of its own and is answered: the remote may have
// come back after that dial began. The call that began the dial takes the
// refusal.
func TestWSTransportJoinedDialRefusedDialsAgain(t *testing.T) {
	tpNoLeaks(t)
	n := fakenode.Start(t, fakenode.Options{ChainID: 1})
	tr := tpNewWS(t, n.WSURL(), 0)
	ht := tr.dialOpts.HTTPClient.Transport.(*http.Transport)
	dial := ht.DialContext
	began, refuse := make(chan struct{}), make(chan struct{})
	var dials atomic.Int32
	ht.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == 1 { // the remote is down, until the second call has joined
			close(began)
			<-refuse
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return dial(ctx, network, addr)
	}
	joined := make(chan struct{}, 1)
	tr.joinedDial = func() { joined <- struct{}{} }

	call := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			_, _, err := tr.Call(context.Background(), "eth_chainId", nil)
			done <- err
		}()
		return done
	}
	first := call()
	<-began
	second := call()
	<-joined
	close(refuse)
	if err := <-first; !errors.Is(err, ErrTransport) {
		t.Errorf("the call that began the refused dial: %v, want ErrTransport", err)
	}
	if err := <-second; err != nil {
		t.Errorf("the call that joined the refused dial: %v, want it answered on a dial of its own", err)
	}
	if d := dials.Load(); d != 2 {
		t.Errorf("%d dials, want 2", d)
	}
}

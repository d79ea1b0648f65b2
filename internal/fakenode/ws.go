package fakenode

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/jsonscan"
)

// WebSocket limits.
const (
	// SendQueue is how many messages may wait for a WebSocket client; one
	// more and the client is dropped as too slow, so it never stalls the
	// node or other subscribers.
	SendQueue = 4096
	// wsMaxInflight bounds the messages of one connection served at once;
	// beyond it the node stops reading, which pushes back on the client.
	wsMaxInflight  = 256
	wsWriteTimeout = 10 * time.Second
)

// wsConn is one WebSocket client. Its reader runs in the HTTP handler's
// goroutine, each message is served on its own goroutine (as geth does),
// and one writer goroutine drains the send queue in order.
type wsConn struct {
	n      *Node
	c      *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
	req    *http.Request // the handshake: valid while run runs in its handler
	once   sync.Once
	wg     sync.WaitGroup // writer and message goroutines

	dead bool // guarded by Node.mu: subscriptions may no longer start
}

func (n *Node) serveWS(w http.ResponseWriter, r *http.Request) {
	f := n.faults.Load()
	// Handshakes are not delayed; drop and fail status refuse them.
	switch {
	case f.drop:
		dropConn(w)
		return
	case f.failStatus != 0:
		writeFail(w, f)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		n.log.Debug("websocket handshake failed", "err", err)
		return
	}
	c.SetReadLimit(MaxWSMessageBytes)
	ctx, cancel := context.WithCancel(context.Background())
	wc := &wsConn{n: n, c: c, ctx: ctx, cancel: cancel, out: make(chan []byte, SendQueue), req: r}
	if !n.addConn(wc) {
		wc.close()
		return
	}
	defer n.removeConn(wc)
	wc.run()
}

// run reads until the connection ends, then waits for its goroutines.
func (wc *wsConn) run() {
	wc.wg.Add(1)
	go wc.writeLoop()
	sem := make(chan struct{}, wsMaxInflight)
read:
	for {
		_, data, err := wc.c.Read(wc.ctx)
		if err != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-wc.ctx.Done():
			break read
		}
		wc.wg.Add(1)
		go func() {
			defer wc.wg.Done()
			defer func() { <-sem }()
			wc.handle(data)
		}()
	}
	wc.close()
	wc.n.dropSubs(wc)
	wc.wg.Wait()
}

func (wc *wsConn) writeLoop() {
	defer wc.wg.Done()
	for {
		select {
		case <-wc.ctx.Done():
			return
		case msg := <-wc.out:
			ctx, cancel := context.WithTimeout(wc.ctx, wsWriteTimeout)
			err := wc.c.Write(ctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				wc.close()
				return
			}
		}
	}
}

// handle serves one message, with the same faults as an HTTP request.
func (wc *wsConn) handle(data []byte) {
	n := wc.n
	f := n.faults.Load()
	var (
		store  [1]message
		msgs   []message
		batch  bool
		parsed bool
	)
	empty := len(data) == jsonscan.SkipSpace(data, 0)
	if !empty {
		msgs, batch, parsed = parseBody(data, store[:0])
		n.countMessages(msgs, parsed)
	}
	if !n.delay(wc.ctx, f) {
		return
	}
	switch {
	case f.drop:
		n.log.Debug("dropping websocket connection")
		wc.close()
		return
	case f.garbage:
		wc.send([]byte(garbageBody))
		return
	case empty:
		return
	}
	c := &call{ctx: wc.ctx, view: n.view.Load(), ws: wc, req: wc.req}
	resp := n.answer(c, f, msgs, batch, parsed, nil)
	if len(c.subs) > 0 {
		n.activate(c, resp)
		return
	}
	if len(resp) > 0 {
		wc.send(resp)
	}
}

// send queues msg, dropping the client if its queue is full. It never
// blocks, so it is safe under Node.mu.
func (wc *wsConn) send(msg []byte) {
	select {
	case wc.out <- msg:
	default:
		wc.n.log.Debug("websocket client too slow, dropping it")
		wc.close()
	}
}

// close cuts the connection at once, like a dying process: no close
// handshake.
func (wc *wsConn) close() {
	wc.once.Do(func() {
		wc.cancel()
		_ = wc.c.CloseNow()
	})
}

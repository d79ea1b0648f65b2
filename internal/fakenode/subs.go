package fakenode

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
)

// MaxHeadsPerChange caps the blocks one chain change notifies: Mine(100000)
// with a subscriber sends only the last MaxHeadsPerChange headers.
const MaxHeadsPerChange = 1024

type subKind int

const (
	subHeads subKind = iota
	subLogs
	subPending
)

// subscription is one eth_subscribe of one WebSocket connection. Node.mu
// guards the set of them.
type subscription struct {
	id     string
	seq    uint64 // creation order, for a stable delivery order
	conn   *wsConn
	kind   subKind
	filter *logFilter // subLogs only
}

// newSubID makes an id like geth's: 16 random bytes, hex, leading zeros
// trimmed.
func newSubID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	id := strings.TrimLeft(hex.EncodeToString(b[:]), "0")
	if id == "" {
		id = "0"
	}
	return "0x" + id
}

// subscribe serves *_subscribe. Over HTTP there are no notifications; over
// WebSocket the subscription starts once the answer is queued (see call).
func (n *Node) subscribe(c *call, method string, params []byte) ([]byte, *jrpc.Error) {
	if c.ws == nil {
		return nil, errNotificationsUnsupported
	}
	name, rerr := subscriptionName(params)
	if rerr != nil {
		return nil, rerr
	}
	namespace := strings.TrimSuffix(method, "_subscribe")
	sub := &subscription{id: newSubID(), conn: c.ws}
	maxArgs, required := 1, 1
	switch {
	case namespace == "eth" && name == "newHeads":
		sub.kind = subHeads
	case namespace == "eth" && name == "logs":
		sub.kind, maxArgs, required = subLogs, 2, 2
	case namespace == "eth" && name == "newPendingTransactions":
		sub.kind, maxArgs = subPending, 2
	default:
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: fmt.Sprintf("no %q subscription in %s namespace", name, namespace)}
	}
	var store [2][]byte
	args, rerr := splitArgs(params, store[:0], maxArgs, required)
	if rerr != nil {
		return nil, rerr
	}
	if sub.kind == subLogs {
		q, err := parseFilter(args[1])
		if err != nil {
			return nil, argErr(1, err)
		}
		sub.filter = &q.logFilter
	}
	c.subs = append(c.subs, sub)
	return []byte(`"` + sub.id + `"`), nil
}

// subscriptionName reads the first argument of *_subscribe as geth does.
func subscriptionName(params []byte) (string, *jrpc.Error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || p[0] != '[' {
		return "", invalidParams("non-array args")
	}
	var name string
	first, ok := (&jsonscan.Array{Data: p, I: 1}).Next()
	if !ok || json.Unmarshal(first, &name) != nil {
		return "", invalidParams("expected subscription name as first argument")
	}
	return name, nil
}

// unsubscribe serves *_unsubscribe: true, or geth's "subscription not
// found" for an id this connection does not hold.
func (n *Node) unsubscribe(c *call, params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	var id string
	if err := json.Unmarshal(args[0], &id); err != nil {
		return nil, argErr(0, err)
	}
	if c.ws == nil {
		return nil, errSubscriptionNotFound
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.subs[id]
	if s == nil || s.conn != c.ws {
		return nil, errSubscriptionNotFound
	}
	delete(n.subs, id)
	return []byte(resultTrue), nil
}

// activate queues a request's answer and then starts the subscriptions it
// created, under n.mu so that no chain change slips in between.
func (n *Node) activate(c *call, answer []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(answer) > 0 {
		c.ws.send(answer)
	}
	if c.ws.dead {
		return
	}
	for _, s := range c.subs {
		n.subSeq++
		s.seq = n.subSeq
		n.subs[s.id] = s
	}
}

// dropSubs ends every subscription of a closing connection.
func (n *Node) dropSubs(wc *wsConn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	wc.dead = true
	for id, s := range n.subs {
		if s.conn == wc {
			delete(n.subs, id)
		}
	}
}

// sortedSubs returns the subscriptions in creation order. n.mu must be held.
func (n *Node) sortedSubs() []*subscription {
	out := make([]*subscription, 0, len(n.subs))
	for _, s := range n.subs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// notification builds an eth_subscription message in geth's field order.
func notification(id string, result []byte) []byte {
	buf := make([]byte, 0, 96+len(id)+len(result))
	buf = append(buf, `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"`...)
	buf = append(buf, id...)
	buf = append(buf, `","result":`...)
	buf = append(buf, result...)
	return append(buf, "}}"...)
}

// notifyChange tells subscribers what moved between two views: removed
// logs of the dropped blocks (ascending, as geth), then each new block's
// header and logs. A pure rewind notifies the new head alone. n.mu must be
// held.
func (n *Node) notifyChange(old, nv *chainView) {
	if len(n.subs) == 0 {
		return
	}
	subs := n.sortedSubs()
	oldVis, newVis := old.visible(), nv.visible()
	removedFrom, addedFrom := oldVis+1, oldVis+1
	if d, ok := divergence(old, nv); ok && d <= oldVis {
		removedFrom, addedFrom = d, d
	}
	if newVis < oldVis {
		removedFrom = min(removedFrom, newVis+1)
	}
	if oldVis >= removedFrom && oldVis-removedFrom+1 > MaxHeadsPerChange {
		removedFrom = oldVis - MaxHeadsPerChange + 1
	}
	if newVis >= addedFrom && newVis-addedFrom+1 > MaxHeadsPerChange {
		addedFrom = newVis - MaxHeadsPerChange + 1
	}

	for num := removedFrom; num <= oldVis; num++ {
		n.notifyLogs(subs, n.block(old, num), true)
	}
	switch {
	case addedFrom <= newVis:
		for num := addedFrom; num <= newVis; num++ {
			b := n.block(nv, num)
			n.notifyHead(subs, b)
			n.notifyLogs(subs, b, false)
		}
	case removedFrom <= oldVis:
		n.notifyHead(subs, n.block(nv, newVis))
	}
}

func (n *Node) notifyHead(subs []*subscription, b *synthBlock) {
	if h := n.faults.Load().bogusHead; h != 0 && b.salt != bogusSalt {
		b = n.bogusBlock(n.view.Load(), h) // a liar keeps lying
	}
	var header []byte
	for _, s := range subs {
		if s.kind != subHeads {
			continue
		}
		if header == nil {
			header = n.appendHeader(nil, b)
		}
		s.conn.send(notification(s.id, header))
	}
}

func (n *Node) notifyLogs(subs []*subscription, b *synthBlock, removed bool) {
	for i := range b.txs {
		tx := &b.txs[i]
		var entry []byte
		for _, s := range subs {
			if s.kind != subLogs || !s.filter.match(n.tables, tx.g) {
				continue
			}
			if entry == nil {
				entry = n.appendLog(nil, b, tx, removed)
			}
			s.conn.send(notification(s.id, entry))
		}
	}
}

// notifyPending tells newPendingTransactions subscribers of a sent
// transaction.
func (n *Node) notifyPending(h common.Hash) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.sortedSubs() {
		if s.kind == subPending {
			s.conn.send(notification(s.id, appendHash(nil, h)))
		}
	}
}

// PushHead sends header, as is, to every newHeads subscriber: the heads of
// a chain whose blocks come from elsewhere (ShapeChain).
func (n *Node) PushHead(header []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.sortedSubs() {
		if s.kind == subHeads {
			s.conn.send(notification(s.id, header))
		}
	}
}

package natsfeed

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

// The event types, as each message's "type" says and its subject ends.
const (
	TypeBlock    = "block"
	TypeReorg    = "reorg"
	TypeGap      = "gap"
	TypeFinality = "finality"
)

// Why a gap event was published.
const (
	// GapBehind: the blocks went by while the feed could not publish
	// (NATS down, no leader) and are out of the head window now.
	GapBehind = "behind"
	// GapTooLarge: the block's message is over the NATS server's
	// max_payload; raise it (8 MB covers Ethereum mainnet).
	GapTooLarge = "too_large"
	// GapFresh: the leader's head feed itself jumped (it was away longer
	// than its backfill) and started a fresh window.
	GapFresh = "fresh"
)

// Headers every message carries besides Nats-Msg-Id.
const (
	// HeaderGen and HeaderSeq are the headstore event the message is of:
	// its history and sequence number (consecutive within a history).
	HeaderGen = "Venn-Gen"
	HeaderSeq = "Venn-Seq"
	// HeaderPart is "K/N": the message is the K-th (from 0) of the N an
	// event became; "cK/N" for the messages of a catch-up.
	HeaderPart = "Venn-Part"
	// HeaderHead is the chain as the stream has told it once this message
	// is applied: "NUMBER HASH" (the hash is empty after a gap whose last
	// block's hash is unknown).
	HeaderHead = "Venn-Head"
	// HeaderSafe and HeaderFinalized are the finality told so far.
	HeaderSafe      = "Venn-Safe"
	HeaderFinalized = "Venn-Finalized"
)

// Ref names a block.
type Ref struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// Event is one message of the stream, decoded. Which fields are set
// depends on Type:
//
//   - block: Number, Hash, Parent, Block (the node's block JSON with
//     transactions as hashes) and Receipts (the node's receipts JSON,
//     logs included), byte for byte as the node sent them.
//   - reorg: Common is the newest block the new branch keeps; every block
//     above Common.Number left the chain (Removed names those the feed
//     told, ascending), and the new branch's blocks (Added, ascending)
//     follow as block events.
//   - gap: blocks From..To are canonical but not in the stream: fetch them
//     from history (eth_getBlockByNumber); ToHash is To's hash when known.
//   - finality: Safe and Finalized are the chain's new safe and finalized
//     block numbers (0: unknown).
type Event struct {
	Type     string          `json:"type"`
	Number   uint64          `json:"number,omitempty"`
	Hash     string          `json:"hash,omitempty"`
	Parent   string          `json:"parent,omitempty"`
	Block    json.RawMessage `json:"block,omitempty"`
	Receipts json.RawMessage `json:"receipts,omitempty"`

	Common  *Ref  `json:"common,omitempty"`
	Removed []Ref `json:"removed,omitempty"`
	Added   []Ref `json:"added,omitempty"`

	From   uint64 `json:"from,omitempty"`
	To     uint64 `json:"to,omitempty"`
	ToHash string `json:"to_hash,omitempty"`
	Reason string `json:"reason,omitempty"`

	Safe      uint64 `json:"safe,omitempty"`
	Finalized uint64 `json:"finalized,omitempty"`
}

// Decode decodes a stream message's data.
func Decode(data []byte) (*Event, error) {
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	switch ev.Type {
	case TypeBlock, TypeReorg, TypeGap, TypeFinality:
	default:
		return nil, fmt.Errorf("decode event: unknown type %q", ev.Type)
	}
	return &ev, nil
}

// told is the chain as the stream has told it: what a consumer that
// applied every message holds.
type told struct {
	// last is the stream's last sequence (0: empty stream).
	last uint64
	// gen, seq and done: the headstore event the last message was of, and
	// whether it was that event's last message (a catch-up's, with
	// catchup).
	gen     string
	seq     uint64
	done    bool
	catchup bool
	// head is the chain's head as told; known is false while nothing was
	// told (an empty stream) or what was told is lost (aged out).
	head  headstore.Cursor
	known bool

	safe, finalized uint64
}

// out is one message to publish and the told state once it is applied.
type out struct {
	subject string
	data    []byte
	id      string
	part    string
	after   told
}

func (o *out) msg() *nats.Msg {
	m := nats.NewMsg(o.subject)
	m.Data = o.data
	m.Header.Set(HeaderGen, o.after.gen)
	m.Header.Set(HeaderSeq, strconv.FormatUint(o.after.seq, 10))
	m.Header.Set(HeaderPart, o.part)
	if o.after.known {
		m.Header.Set(HeaderHead, strconv.FormatUint(o.after.head.Number, 10)+" "+o.after.head.Hash)
	}
	m.Header.Set(HeaderSafe, strconv.FormatUint(o.after.safe, 10))
	m.Header.Set(HeaderFinalized, strconv.FormatUint(o.after.finalized, 10))
	return m
}

// size is the message's size as the server's max_payload counts it,
// headers included, near enough.
func (o *out) size() int { return len(o.data) + len(o.subject) + 256 }

// parseTold reads the told state off the stream's last message.
func parseTold(seq uint64, h nats.Header) told {
	t := told{last: seq, gen: h.Get(HeaderGen)}
	t.seq, _ = strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
	part := h.Get(HeaderPart)
	t.catchup = strings.HasPrefix(part, "c")
	if k, n, ok := strings.Cut(strings.TrimPrefix(part, "c"), "/"); ok {
		ki, err1 := strconv.Atoi(k)
		ni, err2 := strconv.Atoi(n)
		t.done = err1 == nil && err2 == nil && ki == ni-1
	}
	if hd := h.Get(HeaderHead); hd != "" {
		num, hash, _ := strings.Cut(hd, " ")
		if n, err := strconv.ParseUint(num, 10, 64); err == nil {
			t.head, t.known = headstore.Cursor{Number: n, Hash: hash}, true
		}
	}
	t.safe, _ = strconv.ParseUint(h.Get(HeaderSafe), 10, 64)
	t.finalized, _ = strconv.ParseUint(h.Get(HeaderFinalized), 10, 64)
	return t
}

// batch builds the messages of one headstore event (or one catch-up),
// each with the told state after it.
type batch struct {
	subj    Subjects
	st0     told // before
	st      told // after the messages so far
	catchup bool
	list    []*out
}

func (b *batch) add(subject string, data []byte) {
	b.list = append(b.list, &out{subject: subject, data: data, after: b.st})
}

func (b *batch) block(p *evm.Parts) {
	data := make([]byte, 0, 160+len(p.HashOnly)+len(p.Block.Receipts))
	data = append(data, `{"type":"block","number":`...)
	data = strconv.AppendUint(data, p.Number, 10)
	data = append(data, `,"hash":`...)
	data = strconv.AppendQuote(data, p.Hash)
	data = append(data, `,"parent":`...)
	data = strconv.AppendQuote(data, p.Parent)
	data = append(data, `,"block":`...)
	data = append(data, p.HashOnly...)
	data = append(data, `,"receipts":`...)
	if len(p.Block.Receipts) == 0 {
		data = append(data, "[]"...)
	} else {
		data = append(data, p.Block.Receipts...)
	}
	data = append(data, '}')
	b.st.head, b.st.known = headstore.Cursor{Number: p.Number, Hash: p.Hash}, true
	b.add(b.subj.Block(p.Number), data)
}

func (b *batch) reorg(common Ref, removed, added []Ref) {
	data, _ := json.Marshal(Event{Type: TypeReorg, Common: &common, Removed: removed, Added: added})
	b.st.head, b.st.known = headstore.Cursor{Number: common.Number, Hash: common.Hash}, true
	b.add(b.subj.Reorg(), data)
}

func (b *batch) gap(from, to uint64, toHash, reason string) {
	data, _ := json.Marshal(Event{Type: TypeGap, From: from, To: to, ToHash: toHash, Reason: reason})
	b.st.head, b.st.known = headstore.Cursor{Number: to, Hash: toHash}, true
	b.add(b.subj.Gap(), data)
}

// finality tells safe and finalized when either moved up.
func (b *batch) finality(safe, finalized uint64) {
	safe, finalized = max(safe, b.st.safe), max(finalized, b.st.finalized)
	if safe == b.st.safe && finalized == b.st.finalized {
		return
	}
	data, _ := json.Marshal(Event{Type: TypeFinality, Safe: safe, Finalized: finalized})
	b.st.safe, b.st.finalized = safe, finalized
	b.add(b.subj.Finality(), data)
}

// seal names the messages of the event gen:seq: their ids and parts. A
// catch-up's ids also name the stream position it started from, so two
// catch-ups at one event never share an id unless they publish the same.
func (b *batch) seal(gen string, seq uint64) {
	n := len(b.list)
	c, from := "", ""
	if b.catchup {
		c, from = "c", "c"+strconv.FormatUint(b.st0.last, 10)+":"
	}
	for i, o := range b.list {
		o.part = c + strconv.Itoa(i) + "/" + strconv.Itoa(n)
		o.id = gen + ":" + strconv.FormatUint(seq, 10) + ":" + from + strconv.Itoa(i) + "/" + strconv.Itoa(n)
		o.after.gen, o.after.seq = gen, seq
		o.after.done, o.after.catchup = i == n-1, b.catchup
	}
}

func refs(ps []*evm.Parts) []Ref {
	out := make([]Ref, len(ps))
	for i, p := range ps {
		out[i] = Ref{Number: p.Number, Hash: p.Hash}
	}
	return out
}

package natsfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/retry"
)

// Options are what a chain's publisher is built from.
type Options struct {
	Chain string
	// Prefix is the subjects' first token(s): PREFIX.CHAIN.events.>.
	Prefix string
	Config Config
	// JS publishes; it is the process's NATS connection's. Or else Conn
	// returns that connection (nil until it is started).
	JS   jetstream.JetStream
	Conn func() *nats.Conn
	// Store is the chain's head store, whose events the publisher
	// follows; Window is this replica's window of it, which a catch-up
	// reads.
	Store  headstore.Store
	Window *headstore.Window
	// Fetch finds a block that left the chain and the window never held
	// (a leader that started after the reorg); nil: the reorg is told
	// from the window's low end instead.
	Fetch  headstore.FetchBlock
	Logger *slog.Logger
	// Metrics nil: unregistered ones.
	Metrics *Metrics
}

// Publisher publishes one chain's head feed to its JetStream stream while
// this replica leads the chain (Lead). Every message is published with
// the stream's last sequence as the expected one, so a deposed leader
// that still publishes is refused by the server instead of interleaving,
// and with an id from the headstore event, so a publish retried after a
// lost ack is dropped as a duplicate.
type Publisher struct {
	chain string
	cfg   Config
	subj  Subjects
	js    jetstream.JetStream
	conn  func() *nats.Conn
	store headstore.Store
	w     *headstore.Window
	fetch headstore.FetchBlock
	log   *slog.Logger
	m     chainMetrics

	// noReplay: the last replay found the store's events gone; the next
	// run catches up from the window instead.
	noReplay bool
	state    atomic.Int32
}

// The publisher's states, as State reports them.
const (
	StateIdle       = "idle"       // not leading the chain
	StatePublishing = "publishing" // leading, the stream up to date
	StateFailing    = "failing"    // leading, NATS unreachable or refusing
	StateConflict   = "conflict"   // the stream exists with another shape
)

var stateNames = []string{StateIdle, StatePublishing, StateFailing, StateConflict}

// New returns a chain's publisher. It does no I/O.
func New(o Options) *Publisher {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return &Publisher{
		chain: o.Chain,
		cfg:   o.Config.WithDefaults(o.Chain),
		subj:  SubjectsFor(o.Prefix, o.Chain),
		js:    o.JS,
		conn:  o.Conn,
		store: o.Store,
		w:     o.Window,
		fetch: o.Fetch,
		log:   o.Logger.With("chain", o.Chain, "stream", o.Config.WithDefaults(o.Chain).Name),
		m:     o.Metrics.forChain(o.Chain),
	}
}

// State is what the publisher is doing: StateIdle, StatePublishing,
// StateFailing or StateConflict.
func (p *Publisher) State() string { return stateNames[p.state.Load()] }

func (p *Publisher) setState(s int32) {
	p.state.Store(s)
	p.m.up.Set(map[bool]float64{true: 1}[s == 1])
}

// Stream is the stream's name.
func (p *Publisher) Stream() string { return p.cfg.Name }

// errResync: the stream is not where the publisher thought (a duplicate
// ack); read its tail again.
var errResync = errors.New("natsfeed: the stream moved; reading its tail again")

// errNotConnected: NATS is away; the publisher waits for it.
var errNotConnected = errors.New("natsfeed: not connected to NATS")

// Lead publishes the chain's feed until ctx ends: the shape a leadership
// runs. NATS being away never stops it; it retries with a backoff and,
// once NATS is back, publishes what it missed.
func (p *Publisher) Lead(ctx context.Context, _ uint64) {
	defer p.setState(0)
	backoff := time.Duration(0)
	failing := false
	for {
		err := p.run(ctx)
		if ctx.Err() != nil {
			return
		}
		var conflict *ConflictError
		switch {
		case errors.As(err, &conflict):
			p.setState(3)
			backoff = 30 * time.Second
		case errors.Is(err, headstore.ErrGap), errors.Is(err, errResync):
			backoff = 0
		default:
			p.setState(2)
			backoff = retry.Double(backoff, 100*time.Millisecond, 5*time.Second)
		}
		p.m.errors.Inc()
		if !failing || conflict != nil {
			p.log.Warn("natsfeed: publishing stopped; retrying", "err", err, "retry_in", backoff)
		} else {
			p.log.Debug("natsfeed: publishing failed again", "err", err, "retry_in", backoff)
		}
		failing = backoff > 0
		if backoff > 0 && !retry.Sleep(ctx, backoff/2+rand.N(backoff/2+1)) {
			return
		}
	}
}

// run ensures the stream, reads where it stands, and publishes from
// there: the store's events after the stream's last one when the store
// still has them, or else what the window holds after the stream's head.
func (p *Publisher) run(ctx context.Context) error {
	if p.js == nil {
		var nc *nats.Conn
		if p.conn != nil {
			nc = p.conn()
		}
		if nc == nil {
			return errNotConnected
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		p.js = js
	}
	stream, err := p.ensure(ctx)
	if err != nil {
		return err
	}
	st, err := p.tail(ctx, stream)
	if err != nil {
		return err
	}
	if err := p.waitWindow(ctx); err != nil {
		return err
	}
	if p.canReplay(st) {
		p.setState(1)
		err := p.follow(ctx, &st, st.gen, st.seq)
		if !errors.Is(err, headstore.ErrGap) {
			return err
		}
		p.log.Info("natsfeed: the store no longer holds the events after the stream's; catching up from the window",
			"err", err, "stream_seq", st.last)
	}
	p.noReplay = false
	gen, seq, err := p.catchUp(ctx, &st)
	if err != nil {
		return err
	}
	p.setState(1)
	return p.follow(ctx, &st, gen, seq)
}

// tail reads the stream's last message: where the stream stands.
func (p *Publisher) tail(ctx context.Context, s jetstream.Stream) (told, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return told{}, fmt.Errorf("stream info: %w", err)
	}
	last := info.State.LastSeq
	if last == 0 {
		return told{}, nil
	}
	m, err := s.GetMsg(ctx, last)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Aged out (or deleted): the stream's chain is not known; the
		// catch-up tells the window from its low end, as a reorg.
		return told{last: last}, nil
	}
	if err != nil {
		return told{}, fmt.Errorf("stream tail %d: %w", last, err)
	}
	return parseTold(last, m.Header), nil
}

// canReplay: the stream's last message ended a headstore event of the
// history the window follows, not after it.
func (p *Publisher) canReplay(st told) bool {
	if p.noReplay || !st.known || !st.done || st.gen == "" {
		return false
	}
	gen, seq := p.w.Seq()
	return gen == st.gen && st.seq <= seq
}

// waitWindow waits for the window to hold a chain.
func (p *Publisher) waitWindow(ctx context.Context) error {
	for {
		changed := p.w.Changed()
		if _, _, ok := p.w.Head(); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// follow publishes every store event after gen:seq.
func (p *Publisher) follow(ctx context.Context, st *told, gen string, seq uint64) error {
	err := p.store.Follow(ctx, gen, seq, func(ev *headstore.Event) error {
		b := &batch{subj: p.subj, st0: *st, st: *st}
		if err := p.event(b, ev); err != nil {
			return err
		}
		b.seal(gen, ev.Seq)
		return p.publish(ctx, st, b.list, ev.Time)
	})
	if errors.Is(err, headstore.ErrGap) {
		p.noReplay = true
	}
	return err
}

// event turns one headstore event into messages: a reorg (or a gap) if
// its branch does not go on from the stream's head, its blocks, then
// finality if it moved.
func (p *Publisher) event(b *batch, ev *headstore.Event) error {
	if len(ev.Added) > 0 {
		parts := make([]*evm.Parts, len(ev.Added))
		for i, blk := range ev.Added {
			e, err := evm.Split(blk)
			if err != nil {
				return fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			parts[i] = e
		}
		first, head := parts[0], b.st.head
		switch {
		case !b.st.known:
			if b.st.last > 0 {
				b.reorg(Ref{Number: first.Number - min(first.Number, 1), Hash: first.Parent}, nil, refs(parts))
			}
		case len(ev.Dropped) > 0 || first.Number <= head.Number:
			removed := make([]Ref, len(ev.Dropped))
			for i, d := range ev.Dropped {
				removed[i] = Ref{Number: d.Number, Hash: d.Hash}
			}
			b.reorg(Ref{Number: first.Number - 1, Hash: first.Parent}, removed, refs(parts))
		case first.Number > head.Number+1:
			b.gap(head.Number+1, first.Number-1, first.Parent, GapFresh)
		case head.Hash != "" && first.Parent != head.Hash:
			b.reorg(Ref{Number: first.Number - 1, Hash: first.Parent}, nil, refs(parts))
		}
		for _, e := range parts {
			b.block(e)
		}
	}
	b.finality(ev.Safe, ev.Finalized)
	return nil
}

// catchUpTries bounds the reads of a window that keeps moving under a
// catch-up's fetch.
const catchUpTries = 5

// catchUp publishes what the window holds after the stream's head: the
// blocks the stream told that left the chain as a reorg, a gap for what
// went by below the window, the window's blocks after that. It returns
// the event the window was at, to follow the store from.
func (p *Publisher) catchUp(ctx context.Context, st *told) (string, uint64, error) {
	v := p.w.View()
	if len(v.Canon) == 0 {
		return "", 0, errors.New("natsfeed: the window emptied")
	}
	b := &batch{subj: p.subj, st0: *st, st: *st, catchup: true}
	canon := v.Canon
	low := canon[0]
	whole := func() {
		for _, e := range canon {
			b.block(e)
		}
	}
	switch {
	case !st.known && st.last == 0:
		whole() // a new stream starts with the window
	case !st.known:
		b.reorg(Ref{Number: low.Number - min(low.Number, 1), Hash: low.Parent}, nil, refs(canon))
		whole()
	default:
		ch, err := p.w.SinceView(ctx, v, st.head, p.fetch)
		switch {
		case errors.Is(err, headstore.ErrOrphanUnknown):
			p.log.Warn("natsfeed: blocks the stream told left the chain and venn no longer has them; "+
				"telling the window from its low end", "err", err, "stream_head", st.head.Number)
			b.reorg(Ref{Number: low.Number - min(low.Number, 1), Hash: low.Parent}, nil, refs(canon))
			whole()
		case err != nil:
			return "", 0, fmt.Errorf("catch up: %w", err)
		default:
			if len(ch.Removed) > 0 {
				r0 := ch.Removed[0]
				b.reorg(Ref{Number: r0.Number - 1, Hash: r0.Parent}, refs(ch.Removed), refs(ch.Added))
			}
			if ch.HasGap {
				hash := ""
				if ch.GapTo+1 == low.Number {
					hash = low.Parent
				}
				b.gap(ch.GapFrom, ch.GapTo, hash, GapBehind)
			}
			for _, e := range ch.Added {
				b.block(e)
			}
		}
	}
	b.finality(v.Safe, v.Finalized)
	b.seal(v.Gen, v.Seq)
	if len(b.list) > 0 {
		p.log.Info("natsfeed: catching up", "messages", len(b.list), "from_stream_seq", st.last, "window_seq", v.Seq)
	}
	if err := p.publish(ctx, st, b.list, 0); err != nil {
		return "", 0, err
	}
	return v.Gen, v.Seq, nil
}

// publish publishes list in order, each after the stream's last message
// as the publisher knows it, and moves st along.
func (p *Publisher) publish(ctx context.Context, st *told, list []*out, evTime int64) error {
	nc := p.js.Conn()
	limit := nc.MaxPayload()
	for _, o := range list {
		if !nc.IsConnected() {
			// nats.go would buffer the publish until it reconnects, and
			// the publisher would wait on its ack meanwhile.
			return errNotConnected
		}
		if int64(o.size()) > limit && o.subject != p.subj.Gap() {
			// Not publishable as it is: say so, with the hash, so the
			// stream's chain goes on from it.
			p.log.Error("natsfeed: a block is over the NATS server's max_payload; publishing a gap for it",
				"subject", o.subject, "bytes", len(o.data), "max_payload", limit)
			ev, _ := Decode(o.data)
			g := &batch{subj: p.subj}
			if ev != nil {
				g.gap(ev.Number, ev.Number, ev.Hash, GapTooLarge)
			}
			if len(g.list) == 1 {
				o.subject, o.data = g.list[0].subject, g.list[0].data
			}
		}
		start := time.Now()
		ack, err := p.js.PublishMsg(ctx, o.msg(), jetstream.WithMsgID(o.id), jetstream.WithExpectLastSequence(st.last))
		if err != nil {
			return fmt.Errorf("publish %s: %w", o.id, err)
		}
		if ack.Duplicate {
			return fmt.Errorf("%w (%s was published already)", errResync, o.id)
		}
		*st = o.after
		st.last = ack.Sequence
		p.m.published(o, time.Since(start), evTime)
	}
	return nil
}

// StartSeq is the stream sequence of block n's last message, for a
// consumer that starts from a block number (DeliverByStartSequencePolicy):
// the canonical one, unless a reorg replaced it after.
func StartSeq(ctx context.Context, s jetstream.Stream, subj Subjects, n uint64) (uint64, error) {
	m, err := s.GetLastMsgForSubject(ctx, subj.Block(n))
	if err != nil {
		return 0, fmt.Errorf("block %s: %w", strconv.FormatUint(n, 10), err)
	}
	return m.Sequence, nil
}

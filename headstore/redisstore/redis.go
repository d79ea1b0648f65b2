package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/keyspace"
)

const (
	// redisChunk bounds one MGET of block bodies: a mainnet block with
	// receipts is ~1.5 MB, and one huge reply would stall Redis for every
	// other client.
	redisChunk = 32
	// redisSnapshotTries bounds how often Snapshot starts over when a body
	// vanished under it (a trim or reorg ran between the two reads).
	redisSnapshotTries = 5
	// redisFollowBlock is how long one XREAD waits; it also bounds how late
	// Follow notices a lost history or a cancelled ctx.
	redisFollowBlock = time.Second
	redisFollowCount = 64
)

// Store is a chain's head window in Redis, shared by every replica, under
// the chain's keys (package keyspace: epoch, state, canon, blk:HASH,
// events). Bodies live only in blk keys so that the stream stays small.
type Store struct {
	rdb    redis.UniversalClient
	window int
	keys   keyspace.Chain
}

var _ headstore.Store = (*Store)(nil)

// New returns the store of chain's window in rdb, holding window blocks
// (headstore.DefaultWindow if window <= 0). It does no I/O.
func New(rdb redis.UniversalClient, chain string, window int) *Store {
	if window <= 0 {
		window = headstore.DefaultWindow
	}
	return &Store{rdb: rdb, window: window, keys: keyspace.For(chain)}
}

// Epoch reads the chain's current fencing epoch; 0 if none was set.
func (r *Store) Epoch(ctx context.Context) (uint64, error) {
	n, err := r.rdb.Get(ctx, r.keys.Epoch).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	return n, nil
}

// redisEvent is a headstore.Event as the stream holds it: added blocks reduced to
// refs, no seq (the entry ID carries it).
type redisEvent struct {
	Epoch     uint64          `json:"epoch"`
	Time      int64           `json:"time"`
	Dropped   []headstore.Ref `json:"dropped,omitempty"`
	Added     []headstore.Ref `json:"added"`
	Safe      uint64          `json:"safe,omitempty"`
	Finalized uint64          `json:"finalized,omitempty"`
}

// Publish appends ev and updates the window in one script, only if epoch is
// the chain's current epoch (headstore.ErrFenced otherwise, with nothing written)
// and a non-zero ev.Seq is the stored seq (headstore.ErrStale).
// On success it sets ev.Seq, and ev.Epoch to epoch: the stream records the
// epoch that was checked, not what the caller put in the event. A zero
// ev.Time becomes now.
func (r *Store) Publish(ctx context.Context, epoch uint64, ev *headstore.Event) error {
	if err := checkRedisEvent(ev); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	var g [8]byte
	if _, err := rand.Read(g[:]); err != nil {
		return fmt.Errorf("publish: gen: %w", err)
	}
	if ev.Time == 0 {
		ev.Time = time.Now().UnixNano()
	}
	wire := redisEvent{
		Epoch:     epoch,
		Time:      ev.Time,
		Dropped:   ev.Dropped,
		Added:     make([]headstore.Ref, len(ev.Added)),
		Safe:      ev.Safe,
		Finalized: ev.Finalized,
	}
	for i, b := range ev.Added {
		wire.Added[i] = headstore.Ref{Number: b.Number, Hash: b.Hash}
	}
	e, err := json.Marshal(wire)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}

	args := make([]any, 0, 10+len(ev.Dropped)+4*len(ev.Added))
	args = append(args,
		strconv.FormatUint(epoch, 10),
		hex.EncodeToString(g[:]),
		r.window,
		4*r.window,
		r.keys.BlockPrefix,
		e,
		strconv.FormatUint(ev.Safe, 10),
		strconv.FormatUint(ev.Finalized, 10),
		strconv.FormatUint(ev.Seq, 10),
		len(ev.Dropped),
	)
	for _, d := range ev.Dropped {
		args = append(args, d.Hash)
	}
	args = append(args, len(ev.Added))
	for _, b := range ev.Added {
		body, err := encodeRedisBlock(b)
		if err != nil {
			return fmt.Errorf("publish: block %d: %w", b.Number, err)
		}
		args = append(args, strconv.FormatUint(b.Number, 10), b.Hash, b.Parent, body)
	}

	seq, err := keyspace.Publish.Run(ctx, r.rdb, r.keys.PublishKeys(), args...).Int64()
	if redis.HasErrorPrefix(err, "FENCED") {
		return fmt.Errorf("publish: %w (%v)", headstore.ErrFenced, err)
	}
	if redis.HasErrorPrefix(err, "STALE") {
		return fmt.Errorf("publish: %w (%v)", headstore.ErrStale, err)
	}
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	ev.Seq = uint64(seq)
	ev.Epoch = epoch
	return nil
}

// checkRedisEvent rejects what would break the window's invariant (one
// block per number, parent-linked) before anything reaches Redis.
func checkRedisEvent(ev *headstore.Event) error {
	if ev == nil {
		return errors.New("nil event")
	}
	for i, b := range ev.Added {
		if b == nil || b.Hash == "" {
			return fmt.Errorf("added[%d]: no block or no hash", i)
		}
		if i == 0 {
			continue
		}
		prev := ev.Added[i-1]
		if b.Number != prev.Number+1 || b.Parent != prev.Hash {
			return fmt.Errorf("added[%d]: block %d %s does not follow block %d %s",
				i, b.Number, b.Hash, prev.Number, prev.Hash)
		}
	}
	return nil
}

// encodeRedisBlock writes b as JSON by hand: encoding/json would compact
// and HTML-escape Raw and Receipts, and they must reach clients byte for
// byte as the remote sent them. Nil raw fields are left out, so they decode
// as nil again.
func encodeRedisBlock(b *evm.Block) ([]byte, error) {
	hash, err := json.Marshal(b.Hash)
	if err != nil {
		return nil, err
	}
	parent, err := json.Marshal(b.Parent)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, len(b.Raw)+len(b.Receipts)+len(hash)+len(parent)+64)
	buf = append(buf, `{"number":`...)
	buf = strconv.AppendUint(buf, b.Number, 10)
	buf = append(buf, `,"hash":`...)
	buf = append(buf, hash...)
	buf = append(buf, `,"parent":`...)
	buf = append(buf, parent...)
	if len(b.Raw) > 0 {
		buf = append(buf, `,"block":`...)
		buf = append(buf, b.Raw...)
	}
	if len(b.Receipts) > 0 {
		buf = append(buf, `,"receipts":`...)
		buf = append(buf, b.Receipts...)
	}
	return append(buf, '}'), nil
}

// decodeRedisBlock reads a blk value as encodeRedisBlock wrote it. It is
// checked to be JSON in one pass (jsonscan.Valid), and its block and
// receipts are kept as sub-slices of body, not copied: a follower reads
// every block's body, 700 KB for 200 transactions, and encoding/json's
// check, scan and copies of it were most of the follower's CPU per block
// (docs/benchmarks-log.md, issue 33).
func decodeRedisBlock(body []byte) (*evm.Block, error) {
	if !jsonscan.Valid(body) {
		return nil, jsonscan.ErrInvalid
	}
	i := jsonscan.SkipSpace(body, 0)
	if body[i] != '{' {
		return nil, errors.New("block body is not an object")
	}
	b := new(evm.Block)
	it := jsonscan.Object{Data: body, I: i + 1}
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		var err error
		switch string(k) {
		case "number":
			b.Number, err = strconv.ParseUint(string(v), 10, 64)
		case "hash":
			err = json.Unmarshal(v, &b.Hash)
		case "parent":
			err = json.Unmarshal(v, &b.Parent)
		case "block":
			b.Raw = v
		case "receipts":
			b.Receipts = v
		}
		if err != nil {
			return nil, fmt.Errorf("block body %q: %w", k, err)
		}
	}
	return b, nil
}

// errRedisNoBody: a blk key named by canon or by an event is gone; a trim
// or reorg removed it since.
var errRedisNoBody = errors.New("block body gone")

// blocks reads the bodies of hashes, redisChunk at a time.
func (r *Store) blocks(ctx context.Context, hashes []string) ([]*evm.Block, error) {
	out := make([]*evm.Block, 0, len(hashes))
	keys := make([]string, 0, min(len(hashes), redisChunk))
	for start := 0; start < len(hashes); start += redisChunk {
		chunk := hashes[start:min(start+redisChunk, len(hashes))]
		keys = keys[:0]
		for _, h := range chunk {
			keys = append(keys, r.keys.BlockPrefix+h)
		}
		vals, err := r.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%w: %s", errRedisNoBody, chunk[i])
			}
			b, err := decodeRedisBlock([]byte(s))
			if err != nil {
				return nil, fmt.Errorf("block %s: %w", chunk[i], err)
			}
			if b.Hash != chunk[i] {
				return nil, fmt.Errorf("block %s: body holds %s", chunk[i], b.Hash)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// Snapshot reads the window at one seq. Canon and state are read
// atomically, the bodies after; since bodies are keyed by hash, a body
// that is there is the right one, and one that is gone means the window
// moved on: start over, a few times at most.
func (r *Store) Snapshot(ctx context.Context) (*headstore.Snapshot, error) {
	var err error
	for range redisSnapshotTries {
		var s *headstore.Snapshot
		s, err = r.snapshot(ctx)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errRedisNoBody) {
			break
		}
	}
	return nil, fmt.Errorf("snapshot: %w", err)
}

func (r *Store) snapshot(ctx context.Context) (*headstore.Snapshot, error) {
	res, err := keyspace.Snapshot.Run(ctx, r.rdb, r.keys.SnapshotKeys()).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 5 {
		return nil, fmt.Errorf("snapshot script: %d values", len(res))
	}
	gen, _ := res[0].(string)
	if gen == "" {
		return &headstore.Snapshot{}, nil
	}
	s := &headstore.Snapshot{Gen: gen}
	for i, f := range []*uint64{&s.Seq, &s.Safe, &s.Finalized} {
		v, _ := res[i+1].(string)
		if v == "" {
			continue
		}
		if *f, err = strconv.ParseUint(v, 10, 64); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	canon, _ := res[4].([]any)
	hashes := make([]string, 0, len(canon)/2)
	for i := 0; i+1 < len(canon); i += 2 {
		h, _ := canon[i].(string)
		hashes = append(hashes, h)
	}
	if len(hashes) == 0 {
		return s, nil
	}
	if s.Blocks, err = r.blocks(ctx, hashes); err != nil {
		return nil, err
	}
	return s, nil
}

// Follow calls fn for each event after seq of history gen, in order. A
// caller whose snapshot was of an empty store (gen "", seq 0) takes
// whatever history starts next, from seq 1.
//
// It returns headstore.ErrGap when the events it needs are gone: trimmed from the
// stream, their bodies trimmed or reorged away (the follower fell too far
// behind), or the history changed (Redis lost its data). Every entry
// carries its gen, so a new history is caught even when it has already
// outrun seq; an idle stream is caught by checking the state on each
// XREAD timeout.
func (r *Store) Follow(ctx context.Context, gen string, seq uint64, fn func(*headstore.Event) error) error {
	last := seq
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := r.rdb.XRead(ctx, &redis.XReadArgs{
			Streams: []string{r.keys.Events, strconv.FormatUint(last, 10) + "-0"},
			Count:   redisFollowCount,
			Block:   redisFollowBlock,
		}).Result()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, redis.Nil) {
			if err := r.checkState(ctx, gen, last); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("follow: %w", err)
		}
		for _, st := range res {
			for _, m := range st.Messages {
				n, err := parseRedisID(m.ID)
				if err != nil {
					return fmt.Errorf("follow: %w", err)
				}
				if n != last+1 {
					return fmt.Errorf("follow: after seq %d came %d: %w", last, n, headstore.ErrGap)
				}
				g, _ := m.Values["g"].(string)
				if gen == "" && last == 0 {
					gen = g
				}
				if g != gen {
					return fmt.Errorf("follow: seq %d is of history %q, not %q: %w", n, g, gen, headstore.ErrGap)
				}
				ev, err := r.event(ctx, m)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, errRedisNoBody) {
					return fmt.Errorf("follow: seq %d: %w: %w", n, headstore.ErrGap, err)
				}
				if err != nil {
					return fmt.Errorf("follow: seq %d: %w", n, err)
				}
				ev.Seq = n
				if err := fn(ev); err != nil {
					return err
				}
				last = n
			}
		}
	}
}

// checkState catches a history that restarted behind an idle stream: the
// stored gen is not ours, or its seq is below ours.
func (r *Store) checkState(ctx context.Context, gen string, last uint64) error {
	vals, err := r.rdb.HMGet(ctx, r.keys.State, "gen", "seq").Result()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("follow: state: %w", err)
	}
	g, _ := vals[0].(string)
	s, _ := vals[1].(string)
	stored, _ := strconv.ParseUint(s, 10, 64)
	switch {
	case gen == "" && last == 0:
		return nil // nothing seen yet: any history will do
	case g != gen:
		return fmt.Errorf("follow: history is %q, not %q: %w", g, gen, headstore.ErrGap)
	case stored < last:
		return fmt.Errorf("follow: stored seq %d is below %d: %w", stored, last, headstore.ErrGap)
	}
	return nil
}

// event decodes one stream entry and fetches the added blocks' bodies.
func (r *Store) event(ctx context.Context, m redis.XMessage) (*headstore.Event, error) {
	e, _ := m.Values["e"].(string)
	var w redisEvent
	if err := json.Unmarshal([]byte(e), &w); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	ev := &headstore.Event{
		Epoch:     w.Epoch,
		Time:      w.Time,
		Dropped:   w.Dropped,
		Safe:      w.Safe,
		Finalized: w.Finalized,
	}
	hashes := make([]string, len(w.Added))
	for i, a := range w.Added {
		hashes[i] = a.Hash
	}
	blocks, err := r.blocks(ctx, hashes)
	if err != nil {
		return nil, err
	}
	ev.Added = blocks
	return ev, nil
}

func parseRedisID(id string) (uint64, error) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseUint(ms, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stream id %q: %w", id, err)
	}
	return n, nil
}

var _ headstore.HeaderStore = (*Store)(nil)

// PublishHeader implements headstore.HeaderStore: a PUBLISH on the chain's headers
// channel, fenced by epoch in the same script.
func (r *Store) PublishHeader(ctx context.Context, epoch uint64, h *headstore.Header) error {
	h.Epoch = epoch
	if h.Time == 0 {
		h.Time = time.Now().UnixNano()
	}
	body, err := encodeHeader(h)
	if err != nil {
		return fmt.Errorf("publish header: %w", err)
	}
	err = keyspace.PublishHeader.Run(ctx, r.rdb, []string{r.keys.Epoch},
		strconv.FormatUint(epoch, 10), body, r.keys.Headers).Err()
	if redis.HasErrorPrefix(err, "FENCED") {
		return fmt.Errorf("publish header: %w (%v)", headstore.ErrFenced, err)
	}
	if err != nil {
		return fmt.Errorf("publish header: %w", err)
	}
	return nil
}

// FollowHeaders implements headstore.HeaderStore: a subscription to the chain's
// headers channel. It returns once the subscription is lost (go-redis
// would subscribe again by itself, but headers missed meanwhile are gone,
// and the caller's retry says so in its log) or ctx ends.
func (r *Store) FollowHeaders(ctx context.Context, fn func(*headstore.Header)) error {
	sub := r.rdb.Subscribe(ctx, r.keys.Headers)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("follow headers: %w", err)
	}
	msgs := sub.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-msgs:
			if !ok {
				return errors.New("follow headers: subscription closed")
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					continue // subscribed again after a lost connection
				}
			case *redis.Message:
				h, err := decodeHeader([]byte(m.Payload))
				if err != nil {
					continue // not one of ours; the block will come
				}
				fn(h)
			}
		}
	}
}

// encodeHeader writes h as the Redis channel carries it, by hand: Raw
// must reach subscribers byte for byte.
func encodeHeader(h *headstore.Header) ([]byte, error) {
	hash, err := json.Marshal(h.Hash)
	if err != nil {
		return nil, err
	}
	parent, err := json.Marshal(h.Parent)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, len(h.Raw)+len(hash)+len(parent)+96)
	buf = append(buf, `{"epoch":`...)
	buf = strconv.AppendUint(buf, h.Epoch, 10)
	buf = append(buf, `,"time":`...)
	buf = strconv.AppendInt(buf, h.Time, 10)
	buf = append(buf, `,"number":`...)
	buf = strconv.AppendUint(buf, h.Number, 10)
	buf = append(buf, `,"hash":`...)
	buf = append(buf, hash...)
	buf = append(buf, `,"parent":`...)
	buf = append(buf, parent...)
	if len(h.Raw) > 0 {
		buf = append(buf, `,"header":`...)
		buf = append(buf, h.Raw...)
	}
	return append(buf, '}'), nil
}

// decodeHeader reads what encodeHeader wrote.
func decodeHeader(body []byte) (*headstore.Header, error) {
	if !jsonscan.Valid(body) {
		return nil, jsonscan.ErrInvalid
	}
	i := jsonscan.SkipSpace(body, 0)
	if body[i] != '{' {
		return nil, errors.New("header is not an object")
	}
	h := new(headstore.Header)
	it := jsonscan.Object{Data: body, I: i + 1}
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		var err error
		switch string(k) {
		case "epoch":
			h.Epoch, err = strconv.ParseUint(string(v), 10, 64)
		case "time":
			h.Time, err = strconv.ParseInt(string(v), 10, 64)
		case "number":
			h.Number, err = strconv.ParseUint(string(v), 10, 64)
		case "hash":
			err = json.Unmarshal(v, &h.Hash)
		case "parent":
			err = json.Unmarshal(v, &h.Parent)
		case "header":
			h.Raw = v
		}
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
	}
	if h.Hash == "" || len(h.Raw) == 0 {
		return nil, errors.New("header without hash or body")
	}
	return h, nil
}

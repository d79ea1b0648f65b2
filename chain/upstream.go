package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/status"
	"github.com/venn-gateway/venn/stalker"
)

// Upstream is a chain's remotes as the history subcommands (backfill,
// verify) use them: the pool serve would build and its stalker, started,
// without a server, a head feed or a cache.
type Upstream struct {
	name string
	pool *remotes.Pool
	st   *stalker.Stalker
}

// OpenUpstream builds the chain's pool as New does and starts it, with a
// reply budget of its own of replyBytes (limits.max_reply_bytes_in_flight);
// Close stops it.
func OpenUpstream(ctx context.Context, cc Config, replyBytes int64, log *slog.Logger) (*Upstream, error) {
	pool, err := cc.newPool(log, remotes.NewMetrics(nil), remotes.NewReplyBudget(replyBytes, nil), nil, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := pool.Start(ctx); err != nil {
		return nil, err
	}
	return &Upstream{name: cc.Name, pool: pool, st: stalker.New(cc.StalkerConfig(nil, nil), pool, pool.Heads(), nil, log, nil)}, nil
}

// Close stops the pool, waiting at most 10 s for its calls.
func (u *Upstream) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return u.pool.Stop(ctx)
}

// WaitHead waits until some remote is in rotation and returns the best
// head. Past within it says, remote by remote, why none is followed.
func (u *Upstream) WaitHead(ctx context.Context, within time.Duration) (uint64, error) {
	deadline := time.Now().Add(within)
	for !u.pool.Ready() || u.pool.Heads().Head() == 0 {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("chain %s: no remote ready after %v: %s", u.name, within, u.notFollowed())
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	return u.pool.Heads().Head(), nil
}

// notFollowed says why each remote is out, in the words of the pool's
// reasons (status.Text: the -32050 data's and /readyz's), each
// reason's code replaced by its text: this is the operator's own process,
// and "its timestamp is 312 s ahead of this host's clock" says more than
// "head_ahead_of_clock".
func (u *Upstream) notFollowed() string {
	st := u.pool.Status()
	rs := status.ReasonsOf(st)
	for i := range rs {
		if i >= len(st) || st[i].Name != rs[i].Remote || len(st[i].Out) == 0 {
			continue
		}
		rs[i].Out = rs[i].Out[:0]
		for _, o := range st[i].Out {
			rs[i].Out = append(rs[i].Out, o.Text)
		}
	}
	return status.Text(rs)
}

// Finalized is the chain's finalized block as the remotes say (0: none).
func (u *Upstream) Finalized(ctx context.Context) uint64 { return u.st.Finalized(ctx) }

// FetchBlock fetches block n with its receipts, checked as the stalker
// checks the head's.
func (u *Upstream) FetchBlock(ctx context.Context, n uint64) (*evm.Block, error) {
	return u.st.FetchBlock(ctx, n)
}

// BlockHash is block n's hash as the remotes say; "" when none has it.
func (u *Upstream) BlockHash(ctx context.Context, n uint64) (string, error) {
	res, err := u.pool.Call(ctx, "eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`))
	if err != nil {
		return "", err
	}
	if string(res) == "null" {
		return "", nil
	}
	var h string
	if err := json.Unmarshal(jsonscan.Member(res, "hash"), &h); err != nil || len(h) != 66 {
		return "", errors.New("the remote's block has no hash")
	}
	return strings.ToLower(h), nil
}

package getlogs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// A single block can still hold more logs than a remote returns in one
// answer (a busy block, a filter over many contracts). No range is
// smaller, so the filter's address list is split instead: each half asks
// for the same block, and the halves' logs, disjoint since every log has
// one address, merge back into the block's order by logIndex.

// maxAddressSplitDepth bounds the halvings of one block's address list:
// enough for geth's 1000 addresses down to one.
const maxAddressSplitDepth = 10

// ByAddress answers the one-block filter params (block n), which a remote
// refused as too large with tl, by halves of its address list; tl is the
// answer when the list cannot be split (one address or none, a cap that
// is not about results) or the halvings run out.
func (s *Split) ByAddress(ctx context.Context, params json.RawMessage, n uint64, tl *TooLarge) (json.RawMessage, error) {
	return s.byAddress(ctx, params, n, tl, 0)
}

// byAddress is ByAddress at a nesting depth.
func (s *Split) byAddress(ctx context.Context, params json.RawMessage, n uint64, tl *TooLarge, depth int) (json.RawMessage, error) {
	if tl.Reason == verdict.ReasonRangeTooLarge || depth >= maxAddressSplitDepth {
		return nil, tl
	}
	addrs, ok := filterAddresses(params)
	if !ok || len(addrs) < 2 {
		return nil, tl // the remote says best what is wrong
	}
	if s.parts.Add(2) > s.maxParts {
		return nil, s.partsOver()
	}
	s.send.Cut()
	halves := [2][]string{addrs[:len(addrs)/2], addrs[len(addrs)/2:]}
	var out [2]json.RawMessage
	g, gctx := errgroup.WithContext(ctx)
	for i, h := range halves {
		sub, err := withAddresses(params, h)
		if err != nil {
			return nil, fmt.Errorf("eth_getLogs block %d by address: %w", n, err)
		}
		g.Go(func() error {
			select {
			case s.sem <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			res, err := s.send.Part(gctx, sub, n, 1)
			<-s.sem
			var more *TooLarge
			if errors.As(err, &more) {
				res, err = s.byAddress(gctx, sub, n, more, depth+1)
			}
			out[i] = res
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if s.bytes.Add(int64(len(out[0])+len(out[1]))) > s.maxBytes {
		return nil, s.bytesOver()
	}
	return mergeByLogIndex(out[0], out[1])
}

// filterAddresses is the address list of an eth_getLogs filter, lowercased
// and without repeats (a repeat in both halves would give its logs twice).
func filterAddresses(params json.RawMessage) ([]string, bool) {
	var f struct {
		Address json.RawMessage `json:"address"`
	}
	if json.Unmarshal(evm.Param(params, 0), &f) != nil {
		return nil, false
	}
	var list []string
	if json.Unmarshal(f.Address, &list) != nil {
		return nil, false
	}
	for i := range list {
		list[i] = strings.ToLower(list[i])
	}
	slices.Sort(list)
	return slices.Compact(list), true
}

// withAddresses is the filter params with its address list replaced.
func withAddresses(params json.RawMessage, addrs []string) (json.RawMessage, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(evm.Param(params, 0), &f); err != nil {
		return nil, err
	}
	a, err := json.Marshal(addrs)
	if err != nil {
		return nil, err
	}
	f["address"] = a
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return json.RawMessage("[" + string(b) + "]"), nil
}

// mergeByLogIndex merges two arrays of one block's logs into the block's
// order.
func mergeByLogIndex(a, b json.RawMessage) (json.RawMessage, error) {
	type entry struct {
		index uint64
		raw   json.RawMessage
	}
	var all []entry
	for _, part := range []json.RawMessage{a, b} {
		var logs []json.RawMessage
		if err := json.Unmarshal(part, &logs); err != nil {
			return nil, fmt.Errorf("%w: eth_getLogs part: %v", wire.ErrBadReply, err)
		}
		for _, l := range logs {
			var li struct {
				LogIndex string `json:"logIndex"`
			}
			if err := json.Unmarshal(l, &li); err != nil {
				return nil, fmt.Errorf("%w: eth_getLogs log: %v", wire.ErrBadReply, err)
			}
			n, err := evm.ParseQuantity(li.LogIndex)
			if err != nil {
				return nil, fmt.Errorf("%w: eth_getLogs logIndex %q", wire.ErrBadReply, li.LogIndex)
			}
			all = append(all, entry{n, l})
		}
	}
	slices.SortStableFunc(all, func(x, y entry) int { return cmp.Compare(x.index, y.index) })
	out := make([]byte, 0, len(a)+len(b)+2)
	out = append(out, '[')
	for i, e := range all {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, bytes.TrimSpace(e.raw)...)
	}
	return append(out, ']'), nil
}

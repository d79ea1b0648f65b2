// Subscriptions that resume: a newHeads or logs subscriber that lost its
// connection subscribes again with the last block it saw, and gets what
// it missed, reorg-corrected, then the live stream.

package subcenter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

// resumeOpts is venn's extension to eth_subscribe, an object after the
// subscription's own params (geth v1.17 has none):
//
//	["newHeads", {"resumeFrom": {"number": "0x…", "hash": "0x…"}}]
//	["logs", {"address": …, "topics": …}, {"resumeFrom": {"number": "0x…", "hash": "0x…"}}]
//
// resumeFrom is the last block whose notifications the subscriber got.
type resumeOpts struct {
	ResumeFrom *struct {
		Number string `json:"number"`
		Hash   string `json:"hash"`
	} `json:"resumeFrom"`
}

// errNotResume: the extra param is not venn's resume object; the caller
// answers as geth does to an extra param.
var errNotResume = errors.New("not a resume object")

// parseResume reads the resume object: errNotResume for anything but an
// object with a resumeFrom member, so that plain clients get geth's
// answers.
func parseResume(raw json.RawMessage) (*headstore.Cursor, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m["resumeFrom"] == nil {
		return nil, errNotResume
	}
	var o resumeOpts
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("venn's resume options: %w", err)
	}
	if o.ResumeFrom == nil {
		return nil, errors.New("venn's resume options: resumeFrom is null")
	}
	n, err := evm.ParseQuantity(o.ResumeFrom.Number)
	if err != nil {
		return nil, fmt.Errorf("resumeFrom.number: %w", err)
	}
	if !isHex(o.ResumeFrom.Hash, 32) {
		return nil, errors.New("resumeFrom.hash: want a 32-byte hex hash")
	}
	return &headstore.Cursor{Number: n, Hash: o.ResumeFrom.Hash}, nil
}

// resumeLocked queues for s, a new subscription, what its subscriber
// missed since cur: from the chain the dispatcher told (the view, read
// under mu, so that no delivery falls between the replay and the live
// stream), the logs of the blocks it was given that left the chain again
// with removed: true, then the canonical blocks after the fork point. A
// cursor above the view (another replica was ahead) gets nothing yet; the
// live blocks up to it are skipped. A cursor below the view is refused,
// naming the oldest block venn can resume from. The caller holds mu.
func (c *Center) resumeLocked(s *sub, cur headstore.Cursor) error {
	if len(c.view) == 0 {
		return &plainError{msg: "cannot resume yet: this replica has no chain; try again"}
	}
	canon := make([]*evm.Parts, len(c.view))
	for i, b := range c.view {
		canon[i] = b.Parts
	}
	ch, err := c.w.SinceOn(canon, cur)
	if err != nil {
		return &plainError{msg: "cannot resume: " + err.Error()}
	}
	if ch.HasGap {
		return &plainError{msg: fmt.Sprintf(
			"cannot resume from block %d: venn resumes from block %d at the oldest (its window holds %d..%d); subscribe afresh and read the rest with eth_getLogs",
			cur.Number, canon[0].Number-1, canon[0].Number, canon[len(canon)-1].Number)}
	}
	s.resumed = true // every block told is one it was given, before or now
	if top := canon[len(canon)-1].Number; ch.Empty() && cur.Number > top {
		s.upTo = cur.Number
		return nil
	}
	var out [][]byte
	var size int64
	add := func(p []byte) { out = append(out, p); size += int64(len(p)) }
	for _, b := range ch.Removed {
		if s.kind != kindLogs {
			continue
		}
		for i := range b.Logs {
			if l := &b.Logs[i]; s.filter.matchesAll(l, b.Number) {
				add(removedLog(l.Raw))
			}
		}
	}
	for _, b := range ch.Added {
		if s.kind == kindHeads {
			add(newHead(b.HashOnly))
			continue
		}
		for i := range b.Logs {
			if l := &b.Logs[i]; s.filter.matchesAll(l, b.Number) {
				add(l.Raw)
			}
		}
	}
	o := c.options()
	if q, qb := s.c.queued(); q+len(out) > o.QueueLen || qb+size > o.QueueBytes {
		return &limitError{msg: fmt.Sprintf(
			"cannot resume from block %d: %d notifications (%d bytes) missed, more than subscription_queue (%d) or subscription_queue_bytes (%d) hold",
			cur.Number, len(out), size, o.QueueLen, o.QueueBytes)}
	}
	for _, p := range out {
		s.c.queue(s, p) // held: written after the reply, in order
	}
	return nil
}

// had reports whether s, resumed above the chain told, already has block
// n; the first block above its cursor ends that.
func (s *sub) had(n uint64) bool {
	if s.upTo == 0 {
		return false
	}
	if n <= s.upTo {
		return true
	}
	s.upTo = 0
	return false
}

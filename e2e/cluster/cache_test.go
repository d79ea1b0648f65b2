//go:build linux

package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// settledBlock is far below the nodes' finalized block (head 200 - 64).
const settledBlock = "0x32"

// cacheLatency holds every upstream answer long enough that two replicas
// asked at once both miss before either has stored the answer.
const cacheLatency = 300 * time.Millisecond

// ethCallBody is a settled eth_call of a token's balanceOf(holder): each
// holder a key of its own.
func ethCallBody(holder int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"%s","input":"0x70a08231%064x"},"%s"]}`,
		fakenode.Contracts()[0], holder, settledBlock)
}

// cachedCall posts body to r: the result and the X-Venn-Cache header.
func cachedCall(r *replica, body []byte) (json.RawMessage, string, error) {
	resp, err := client.Post("http://"+r.rpc+"/"+chain, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return nil, "", err
	}
	if msg.Error != nil || resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("HTTP %d, error %s", resp.StatusCode, msg.Error)
	}
	return msg.Result, resp.Header.Get("X-Venn-Cache"), nil
}

// upstreamCalls is how many eth_call reached any node.
func (c *cluster) upstreamCalls() int64 {
	var n int64
	for _, node := range c.nodes {
		n += node.Calls("eth_call")
	}
	return n
}

// Two replicas on one Redis: the same settled eth_call sent to both is
// asked upstream once in all, one after the other (the second replica
// finds the first's answer in Redis) and both at once (the Redis tier's
// claim makes the second wait for the first's answer).
func TestCacheOneUpstreamCallPerCluster(t *testing.T) {
	c := startCluster(t, 2)
	c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	// want is the node's own answer, asked of it directly.
	want := func(holder int) json.RawMessage {
		resp, err := client.Post(c.nodes[0].URL(), "application/json", bytes.NewReader(ethCallBody(holder)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var msg struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Result == nil {
			t.Fatalf("the node's answer: %v", err)
		}
		return msg.Result
	}

	t.Run("one replica twice", func(t *testing.T) {
		before := c.upstreamCalls()
		var words []string
		var results []json.RawMessage
		for range 2 {
			res, word, err := cachedCall(c.replicas[0], ethCallBody(3))
			if err != nil {
				t.Fatal(err)
			}
			results, words = append(results, res), append(words, word)
		}
		if n := c.upstreamCalls() - before; n != 1 {
			t.Errorf("%d upstream eth_calls for one settled call sent twice, want 1", n)
		}
		if w := want(3); !bytes.Equal(results[0], w) || !bytes.Equal(results[1], w) {
			t.Errorf("answers %s and %s, want %s", results[0], results[1], w)
		}
		if words[0] != "miss" || words[1] != "hit" {
			t.Errorf("X-Venn-Cache %v, want [miss hit]", words)
		}
	})

	t.Run("one after the other", func(t *testing.T) {
		before := c.upstreamCalls()
		var words []string
		var results []json.RawMessage
		for _, r := range c.replicas {
			res, word, err := cachedCall(r, ethCallBody(1))
			if err != nil {
				t.Fatalf("replica %s: %v", r.id, err)
			}
			results, words = append(results, res), append(words, word)
		}
		if n := c.upstreamCalls() - before; n != 1 {
			t.Errorf("%d upstream eth_calls for one settled call on two replicas, want 1", n)
		}
		if w := want(1); !bytes.Equal(results[0], w) || !bytes.Equal(results[1], w) {
			t.Errorf("answers %s and %s, want %s", results[0], results[1], w)
		}
		if words[0] != "miss" || words[1] != "hit" {
			t.Errorf("X-Venn-Cache %v, want [miss hit]", words)
		}
	})

	t.Run("both at once", func(t *testing.T) {
		for _, n := range c.nodes {
			n.SetLatency(cacheLatency)
		}
		defer func() {
			for _, n := range c.nodes {
				n.SetLatency(0)
			}
		}()
		before := c.upstreamCalls()
		results := make([]json.RawMessage, len(c.replicas))
		errs := make([]error, len(c.replicas))
		var wg sync.WaitGroup
		for i, r := range c.replicas {
			wg.Go(func() { results[i], _, errs[i] = cachedCall(r, ethCallBody(2)) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %s: %v", c.replicas[i].id, err)
			}
		}
		if n := c.upstreamCalls() - before; n != 1 {
			t.Errorf("%d upstream eth_calls for one settled call sent to two replicas at once, want 1", n)
		}
		for _, n := range c.nodes {
			n.SetLatency(0)
		}
		if w := want(2); !bytes.Equal(results[0], w) || !bytes.Equal(results[1], w) {
			t.Errorf("answers %s and %s, want %s", results[0], results[1], w)
		}
	})
}

package fakenode

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

type header struct {
	Number     json.RawMessage `json:"number"`
	Hash       string          `json:"hash"`
	ParentHash string          `json:"parentHash"`
}

type logEntry struct {
	Address     string          `json:"address"`
	Topics      []string        `json:"topics"`
	BlockNumber json.RawMessage `json:"blockNumber"`
	BlockHash   string          `json:"blockHash"`
	TxHash      string          `json:"transactionHash"`
	LogIndex    json.RawMessage `json:"logIndex"`
	Removed     bool            `json:"removed"`
}

func TestWSNewHeads(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	id := ws.subscribe(`["newHeads"]`)
	if !strings.HasPrefix(id, "0x") || len(id) > 34 {
		t.Errorf("subscription id %q is not geth-like", id)
	}

	n.Mine(3)
	for want := uint64(101); want <= 103; want++ {
		note := ws.readNote()
		var h header
		if err := json.Unmarshal(note.Params.Result, &h); err != nil {
			t.Fatal(err)
		}
		if note.Params.Subscription != id || hexNum(t, h.Number) != want || h.Hash != n.BlockHash(want) || h.ParentHash != n.BlockHash(want-1) {
			t.Errorf("head %d: got %s", want, note.Params.Result)
		}
	}

	// A rewind announces the new head.
	n.SetHead(95)
	var h header
	if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil || hexNum(t, h.Number) != 95 {
		t.Errorf("after rewind: %+v %v", h, err)
	}

	ws.send(`{"jsonrpc":"2.0","id":2,"method":"eth_unsubscribe","params":["` + id + `"]}`)
	if got := ws.read(); got != `{"jsonrpc":"2.0","id":2,"result":true}` {
		t.Fatalf("unsubscribe: %s", got)
	}
	// Mine queues any notification before the answer to the next call, so
	// the answer coming first proves there was none.
	n.Mine(1)
	ws.send(`{"jsonrpc":"2.0","id":3,"method":"eth_blockNumber"}`)
	if got := ws.read(); got != `{"jsonrpc":"2.0","id":3,"result":"0x60"}` {
		t.Errorf("after unsubscribe: %s", got)
	}
	ws.send(`{"jsonrpc":"2.0","id":4,"method":"eth_unsubscribe","params":["` + id + `"]}`)
	if got := ws.read(); got != `{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"subscription not found"}}` {
		t.Errorf("second unsubscribe: %s", got)
	}
}

// TestWSSubscribeAnswerFirst subscribes while blocks arrive: the id must
// reach the client before any notification.
func TestWSSubscribeAnswerFirst(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			n.Mine(1)
		}
	}()
	ws.send(`[{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]},{"jsonrpc":"2.0","id":2,"method":"eth_chainId"}]`)
	first := ws.read()
	wg.Wait()
	var batch []struct {
		ID     int    `json:"id"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &batch); err != nil || len(batch) != 2 || batch[0].ID != 1 {
		t.Fatalf("first message %s, want the batch answer", first)
	}
	// Heads follow in order, without gaps, up to the last one mined.
	n.Mine(3)
	var prev uint64
	for prev != n.Head() {
		var h header
		if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil {
			t.Fatal(err)
		}
		num := hexNum(t, h.Number)
		if prev != 0 && num != prev+1 {
			t.Fatalf("head %d after %d", num, prev)
		}
		prev = num
	}
}

func TestWSErrors(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	tests := []struct {
		name string
		give string
		want string
	}{
		{"unknown subscription", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["foo"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no \"foo\" subscription in eth namespace"}}`},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":[]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"expected subscription name as first argument"}}`},
		{"logs without filter", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"missing value for required argument 1"}}`},
		{"parse error", `{`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{"plain call", chainIDCall, `{"jsonrpc":"2.0","id":1,"result":"0x539"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws.send(tt.give)
			if got := ws.read(); got != tt.want {
				t.Errorf("\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestWSReorg follows geth: removed logs of the old blocks first, then the
// new headers and logs.
func TestWSReorg(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	contract := Contracts()[0]
	logsID := ws.subscribe(`["logs",{"address":"` + contract + `"}]`)
	headsID := ws.subscribe(`["newHeads"]`)
	old99, old100 := n.BlockHash(99), n.BlockHash(100)

	n.Reorg(2)
	if n.BlockHash(98) == "" || n.BlockHash(99) == old99 || n.BlockHash(100) == old100 {
		t.Fatalf("Reorg(2) kept the top blocks")
	}
	// In blocks 99 and 100 the contract emits one log each (tx 0 of 99,
	// tx 1 of 100).
	type event struct {
		sub    string
		number uint64
		hash   string
		gone   bool
	}
	want := []event{
		{logsID, 99, old99, true},
		{logsID, 100, old100, true},
		{headsID, 99, n.BlockHash(99), false},
		{logsID, 99, n.BlockHash(99), false},
		{headsID, 100, n.BlockHash(100), false},
		{logsID, 100, n.BlockHash(100), false},
	}
	for i, w := range want {
		note := ws.readNote()
		var got event
		got.sub = note.Params.Subscription
		if got.sub == logsID {
			var l logEntry
			if err := json.Unmarshal(note.Params.Result, &l); err != nil {
				t.Fatal(err)
			}
			if l.Address != contract {
				t.Errorf("log of %s passed the filter", l.Address)
			}
			got.number, got.hash, got.gone = hexNum(t, l.BlockNumber), l.BlockHash, l.Removed
		} else {
			var h header
			if err := json.Unmarshal(note.Params.Result, &h); err != nil {
				t.Fatal(err)
			}
			got.number, got.hash = hexNum(t, h.Number), h.Hash
		}
		if got != w {
			t.Errorf("event %d = %+v, want %+v", i, got, w)
		}
	}
}

func TestWSLag(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	ws.subscribe(`["newHeads"]`)
	n.SetLag(2)
	var h header
	if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil || hexNum(t, h.Number) != 98 {
		t.Fatalf("raising the lag announced %+v", h)
	}
	n.Mine(1) // visible 99
	n.SetLag(0)
	for want := uint64(99); want <= 101; want++ {
		if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil || hexNum(t, h.Number) != want {
			t.Fatalf("want head %d, got %+v", want, h)
		}
	}
}

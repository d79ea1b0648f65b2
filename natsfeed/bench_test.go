package natsfeed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/natstest"
)

// mainnetTxs is a mainnet block's transactions; each carries 260 bytes of
// calldata and emits two logs, as fakenode's mainnet shape: the block is
// ~1.1 KB and the receipts ~2.3 KB of JSON per transaction.
const mainnetTxs = 200

// mainnetBlock is block n, mainnet-sized, child of parent.
func mainnetBlock(n uint64, parent string) *evm.Block {
	hash := blockHash("mainnet", n)
	hx := func(i int, what string) string { return blockHash(fmt.Sprintf("%s/%d/%s", hash, i, what), n) }
	addr := func(i int, what string) string { return hx(i, what)[:42] }
	input := "0x" + strings.Repeat("ab", 260)
	bloom := "0x" + strings.Repeat("00", 256)
	var txs, rcs []string
	for i := range mainnetTxs {
		th := hx(i, "tx")
		txs = append(txs, fmt.Sprintf(`{"blockHash":"%s","blockNumber":"0x%x","from":"%s","gas":"0x5208","gasPrice":"0x4a817c800",`+
			`"maxFeePerGas":"0x4a817c800","maxPriorityFeePerGas":"0x3b9aca00","hash":"%s","input":"%s","nonce":"0x%x",`+
			`"to":"%s","transactionIndex":"0x%x","value":"0x0","type":"0x2","accessList":[],"chainId":"0x1","v":"0x1",`+
			`"r":"%s","s":"%s","yParity":"0x1"}`, hash, n, addr(i, "from"), th, input, i, addr(i, "to"), i, hx(i, "r"), hx(i, "s")))
		var logs []string
		for j := range 2 {
			logs = append(logs, fmt.Sprintf(`{"address":"%s","topics":["%s","%s","%s"],"data":"%s","blockNumber":"0x%x",`+
				`"transactionHash":"%s","transactionIndex":"0x%x","blockHash":"%s","logIndex":"0x%x","removed":false}`,
				addr(i, "to"), hx(j, "t0"), hx(i, "t1"), hx(i, "t2"), hx(i, "data"), n, th, i, hash, 2*i+j))
		}
		rcs = append(rcs, fmt.Sprintf(`{"blockHash":"%s","blockNumber":"0x%x","contractAddress":null,"cumulativeGasUsed":"0x%x",`+
			`"effectiveGasPrice":"0x4a817c800","from":"%s","gasUsed":"0x5208","logs":[%s],"logsBloom":"%s","status":"0x1",`+
			`"to":"%s","transactionHash":"%s","transactionIndex":"0x%x","type":"0x2"}`,
			hash, n, 21000*(i+1), addr(i, "from"), strings.Join(logs, ","), bloom, addr(i, "to"), th, i))
	}
	raw := fmt.Sprintf(`{"number":"0x%x","hash":"%s","parentHash":"%s","timestamp":"0x%x","miner":"%s","gasLimit":"0x1c9c380",`+
		`"gasUsed":"0x1000000","baseFeePerGas":"0x3b9aca00","logsBloom":"%s","transactions":[%s]}`,
		n, hash, parent, 1_700_000_000+12*n, addr(0, "miner"), bloom, strings.Join(txs, ","))
	return &evm.Block{Number: n, Hash: hash, Parent: parent, Raw: json.RawMessage(raw),
		Receipts: json.RawMessage("[" + strings.Join(rcs, ",") + "]")}
}

// mainnetChain is n mainnet-sized blocks from 1.
func mainnetChain(n int) []*evm.Block {
	out := make([]*evm.Block, n)
	parent := blockHash("genesis", 0)
	for i := range out {
		out[i] = mainnetBlock(uint64(i+1), parent)
		parent = out[i].Hash
	}
	return out
}

// cpuTime is this process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPublishMainnetBlock is the leader's cost of publishing one
// mainnet-sized block to JetStream (build the messages, publish, wait
// for the ack), against the same run's baseline: every replica's window
// applying the same block (splitting it into its parts). cpu-ms/block is
// this process's CPU (the nats-server's is not in it).
func BenchmarkPublishMainnetBlock(b *testing.B) {
	const pool = 64
	blocks := mainnetChain(pool)
	b.Run("baseline=window-apply", func(b *testing.B) {
		w := headstore.NewWindow(pool)
		b.ReportAllocs()
		cpu := cpuTime()
		b.ResetTimer()
		for i := range b.N {
			if i%pool == 0 {
				w = headstore.NewWindow(pool)
			}
			blk := blocks[i%pool]
			if err := w.Apply(&headstore.Event{Seq: uint64(i%pool + 1), Added: []*evm.Block{blk}}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/block")
	})
	b.Run("feed=jetstream-publish", func(b *testing.B) {
		srv := natstest.Start(b, natstest.Options{})
		nc := srv.Connect()
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		p := New(Options{Chain: testChain, Prefix: testPrefix, Config: Config{MaxBytes: 512 << 20}, JS: js})
		ctx := context.Background()
		if _, err := p.ensure(ctx); err != nil {
			b.Fatal(err)
		}
		st := told{}
		var bytes int
		b.ReportAllocs()
		cpu := cpuTime()
		b.ResetTimer()
		for i := range b.N {
			blk := blocks[i%pool]
			ev := &headstore.Event{Seq: uint64(i + 1), Added: []*evm.Block{blk}}
			if i%pool == 0 {
				st.known = false // the chain starts again: a reorg to its start
			}
			bt := &batch{subj: p.subj, st0: st, st: st}
			if err := p.event(bt, ev); err != nil {
				b.Fatal(err)
			}
			bt.seal("bench", ev.Seq)
			for _, o := range bt.list {
				bytes += len(o.data)
			}
			if err := p.publish(ctx, &st, bt.list, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/block")
		b.ReportMetric(float64(bytes)/float64(b.N), "msg-bytes/block")
	})
}

// BenchmarkFeedDelay is the time from a mainnet-sized block entering the
// head store (the leader publishes it; every window applies it) to its
// event reaching an indexer's consumer from the stream, one block at a
// time as a chain makes them: p50-ms and p99-ms.
func BenchmarkFeedDelay(b *testing.B) {
	srv := natstest.Start(b, natstest.Options{})
	js, err := jetstream.New(srv.Connect())
	if err != nil {
		b.Fatal(err)
	}
	store := headstore.NewMemory(128)
	w := headstore.NewWindow(128)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	defer func() { cancel(); <-done; <-done }()
	go func() { headstore.NewFollower(testChain, store, w, nil, nil).Run(ctx); done <- struct{}{} }()
	p := New(Options{Chain: testChain, Prefix: testPrefix, Config: Config{MaxBytes: 512 << 20}, JS: js, Store: store, Window: w})
	go func() { p.Lead(ctx, 1); done <- struct{}{} }()

	parent := blockHash("genesis", 0)
	first := mainnetBlock(1, parent)
	if err := store.Publish(ctx, headstore.MemoryEpoch, &headstore.Event{Added: []*evm.Block{first}}); err != nil {
		b.Fatal(err)
	}
	var cons jetstream.Consumer
	deadline := time.Now().Add(20 * time.Second)
	for {
		cons, err = js.OrderedConsumer(ctx, "VENN_ETH", jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{SubjectsFor(testPrefix, testChain).All()}, DeliverPolicy: jetstream.DeliverNewPolicy})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the leader creates the stream
	}
	if err != nil {
		b.Fatal(err)
	}
	got := make(chan uint64, 16)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if ev, err := Decode(m.Data()); err == nil && ev.Type == TypeBlock {
			got <- ev.Number
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	blocks := make([]*evm.Block, b.N)
	parent = first.Hash
	for i := range blocks {
		blocks[i] = mainnetBlock(uint64(i+2), parent)
		parent = blocks[i].Hash
	}
	delays := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, blk := range blocks {
		start := time.Now()
		if err := store.Publish(ctx, headstore.MemoryEpoch, &headstore.Event{Added: []*evm.Block{blk}}); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
	wait:
		for {
			select {
			case n := <-got:
				if n == blk.Number {
					break wait
				}
			case <-timeout:
				b.Fatalf("block %d not in the stream after 20s", blk.Number)
			}
		}
		delays = append(delays, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(delays)
	q := func(f float64) float64 {
		return float64(delays[min(len(delays)-1, int(f*float64(len(delays))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

package blockstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// A synthetic chain in geth's JSON shapes, for the tests that need many
// blocks or forks quickly; the geth tests prove the shapes are geth's.

// synthHash is a 32-byte hash named by its parts.
func synthHash(parts ...any) string {
	h := sha256.Sum256([]byte(fmt.Sprint(parts...)))
	return "0x" + hex.EncodeToString(h[:])
}

// synthAddr is the address of the i-th synthetic contract.
func synthAddr(i int) string { return fmt.Sprintf("0x%040x", 0xc0de00+i) }

// synthTopic is the 32-byte topic holding n.
func synthTopic(n int) string { return fmt.Sprintf("0x%064x", n) }

// synthBlock builds block n of fork with the given parent hash: txs
// transactions, transaction i emitting i%4 logs (with 0 to 3 topics) from
// contract i%3.
func synthBlock(t testing.TB, fork string, n uint64, parent string, txs int) *evm.Block {
	t.Helper()
	hash := synthHash(fork, n)
	num, ts := `"`+evm.Quantity(n)+`"`, `"`+evm.Quantity(1_700_000_000+12*n)+`"`
	var txj, rcj []string
	logIndex := 0
	for i := range txs {
		txh := synthHash(fork, n, "tx", i)
		idx := `"` + evm.Quantity(uint64(i)) + `"`
		txj = append(txj, `{"blockHash":"`+hash+`","blockNumber":`+num+`,"blockTimestamp":`+ts+
			`,"from":"0x00000000000000000000000000000000000000aa","gas":"0x5208","hash":"`+txh+
			`","input":"0x","nonce":`+idx+`,"to":"`+synthAddr(i%3)+`","transactionIndex":`+idx+`,"type":"0x2","value":"0x1"}`)
		var logs []string
		for k := range i % 4 {
			var topics []string
			for j := range k {
				topics = append(topics, `"`+synthTopic(100*j+i%5)+`"`)
			}
			logs = append(logs, `{"address":"`+synthAddr(i%3)+`","topics":[`+strings.Join(topics, ",")+
				`],"data":"0x`+strings.Repeat("00", 32)+`","blockNumber":`+num+`,"transactionHash":"`+txh+
				`","transactionIndex":`+idx+`,"blockHash":"`+hash+`","blockTimestamp":`+ts+
				`,"logIndex":"`+evm.Quantity(uint64(logIndex))+`","removed":false}`)
			logIndex++
		}
		rcj = append(rcj, `{"blockHash":"`+hash+`","blockNumber":`+num+`,"contractAddress":null,"cumulativeGasUsed":"0x5208","from":"0x00000000000000000000000000000000000000aa","gasUsed":"0x5208","logs":[`+
			strings.Join(logs, ",")+`],"logsBloom":"0x`+strings.Repeat("00", 256)+`","status":"0x1","to":"`+synthAddr(i%3)+
			`","transactionHash":"`+txh+`","transactionIndex":`+idx+`,"type":"0x2"}`)
	}
	raw := `{"baseFeePerGas":"0x7","difficulty":"0x0","hash":"` + hash + `","logsBloom":"0x` + strings.Repeat("00", 256) +
		`","miner":"0x0000000000000000000000000000000000000000","number":` + num + `,"parentHash":"` + parent +
		`","timestamp":` + ts + `,"transactions":[` + strings.Join(txj, ",") + `],"uncles":[]}`
	return parse(t, []byte(raw), []byte("["+strings.Join(rcj, ",")+"]"))
}

// synthChain builds blocks from..to of fork, each the parent of the next;
// block from's parent is fork's block from-1.
func synthChain(t testing.TB, fork string, from, to uint64, txs int) []*evm.Block {
	t.Helper()
	var out []*evm.Block
	for n := from; n <= to; n++ {
		parent := synthHash(fork, n-1)
		if n == 0 {
			parent = "0x" + strings.Repeat("00", 32)
		}
		out = append(out, synthBlock(t, fork, n, parent, txs))
	}
	return out
}

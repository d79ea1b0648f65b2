package subcenter

import (
	"fmt"
	"slices"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

func resumeParam(fork string, n uint64) string {
	return fmt.Sprintf(`{"resumeFrom":{"number":"%s","hash":"%s"}}`, evm.Quantity(n), blockHash(fork, n))
}

// A logs subscriber that saw blocks up to a/7 comes back after a/6 and
// a/7 were reorged out and b/6..b/9 came: it gets a/6 and a/7's logs
// removed, b/6..b/9's logs, then the live b/10, each once.
func TestResumeLogsAcrossAReorg(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 7, "a")
	c := startCenter(t, f, Options{})
	waitView(t, c, 7)
	f.apply([]headstore.Ref{{Number: 6, Hash: blockHash("a", 6)}, {Number: 7, Hash: blockHash("a", 7)}},
		block("b", 6, "a"), block("b", 7, "b"))
	f.extend("b", 8, 9, "b")
	waitView(t, c, 9)

	n := newNotifier()
	subscribe(t, c, n, `["logs",{},`+resumeParam("a", 7)+`]`)
	f.extend("b", 10, 10, "b")
	want := append(logsOf("a", 6, 7, true), logsOf("b", 6, 10, false)...)
	if got := logNotes(t, n, len(want)); !slices.Equal(got, want) {
		t.Errorf("resumed logs\n got %v\nwant %v", got, want)
	}
	// A later reorg takes back what the replay gave.
	f.apply([]headstore.Ref{{Number: 10, Hash: blockHash("b", 10)}}, block("c", 10, "b"))
	want = append(logsOf("b", 10, 10, true), logsOf("c", 10, 10, false)...)
	if got := logNotes(t, n, len(want)); !slices.Equal(got, want) {
		t.Errorf("after a reorg\n got %v\nwant %v", got, want)
	}
}

// newHeads resumes on the canonical chain; a resume point above the chain
// this replica told (another replica was ahead) skips the live blocks up
// to it.
func TestResumeNewHeads(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 5, "a")
	c := startCenter(t, f, Options{})
	waitView(t, c, 5)

	n := newNotifier()
	subscribe(t, c, n, `["newHeads",`+resumeParam("a", 3)+`]`)
	f.extend("a", 6, 6, "a")
	got := headNumbers(t, n.collect(t, 3))
	n.quiet(t)
	want := []string{}
	for i := uint64(4); i <= 6; i++ {
		h := blockHash("a", i)
		want = append(want, evm.Quantity(i)+"/"+h[len(h)-6:])
	}
	if !slices.Equal(got, want) {
		t.Errorf("resumed heads\n got %v\nwant %v", got, want)
	}

	ahead := newNotifier()
	subscribe(t, c, ahead, `["newHeads",`+resumeParam("a", 8)+`]`)
	f.extend("a", 7, 9, "a")
	got = headNumbers(t, ahead.collect(t, 1))
	ahead.quiet(t)
	if h := blockHash("a", 9); !slices.Equal(got, []string{"0x9/" + h[len(h)-6:]}) {
		t.Errorf("resumed ahead: got %v, want only block 9", got)
	}
}

// A resume point older than the window is refused, naming how far back
// venn resumes; bad resume objects are invalid params.
func TestResumeRefusals(t *testing.T) {
	f := newFeed(t, 4)
	f.extend("a", 1, 9, "a")
	c := startCenter(t, f, Options{})
	waitView(t, c, 9)
	n := newNotifier()
	_, err := c.Subscribe(ctxFor(n), []byte(`["logs",{},`+resumeParam("a", 2)+`]`))
	if !isRPCError(err, -32000, "cannot resume from block 2: venn resumes from block 5 at the oldest (its window holds 6..9); subscribe afresh and read the rest with eth_getLogs") {
		t.Errorf("old resume point: %v", err)
	}
	for _, p := range []string{
		`["newHeads",{"resumeFrom":{"number":"0x5"}}]`,
		`["newHeads",{"resumeFrom":{"number":"5","hash":"` + blockHash("a", 5) + `"}}]`,
		`["newHeads",{"resumeFrom":{"number":"0x5","hash":"` + blockHash("a", 5) + `","x":1}}]`,
		`["logs",{},{"resumeFrom":null}]`,
		`["newHeads",{"resumeFrom":{"number":"0x5","hash":"` + blockHash("a", 5) + `"}},1]`,
		`["logs",{},{}]`, // geth's too many arguments
	} {
		if _, err := c.Subscribe(ctxFor(n), []byte(p)); !isRPCError(err, -32602, "") {
			t.Errorf("%s: %v, want invalid params", p, err)
		}
	}
}

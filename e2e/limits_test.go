package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/jrpc"
)

// Limits the test configures, small so that breaking them is cheap.
const (
	testMaxBodyBytes  = 4 << 10
	testMaxBatchItems = 5
)

// TestLimitsAndBadInput sends what a careless or hostile client would,
// through the whole stack, and expects a JSON-RPC error object with the
// right code (and HTTP status where it matters), never a hang or a bare
// HTTP error page.
func TestLimitsAndBadInput(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{limits: fmt.Sprintf(
		"  max_body_bytes: %d\n  max_batch_items: %d", testMaxBodyBytes, testMaxBatchItems)})

	oversized := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"data":"0x%s"},"latest"]}`,
		strings.Repeat("00", testMaxBodyBytes))
	tests := []struct {
		name       string
		path       string
		give       []byte
		chunked    bool // no Content-Length: venn must stop reading at the limit
		wantStatus int  // 0: not checked
		wantCode   int
	}{
		{
			name:       "oversized body",
			path:       "/" + chainName,
			give:       oversized,
			wantStatus: http.StatusRequestEntityTooLarge,
			wantCode:   jrpc.CodeLimitExceeded,
		},
		{
			name:       "oversized chunked body",
			path:       "/" + chainName,
			give:       oversized,
			chunked:    true,
			wantStatus: http.StatusRequestEntityTooLarge,
			wantCode:   jrpc.CodeLimitExceeded,
		},
		{
			name:     "batch above max_batch_items",
			path:     "/" + chainName,
			give:     batchOf(testMaxBatchItems + 1),
			wantCode: jrpc.CodeLimitExceeded,
		},
		{
			name:       "malformed JSON",
			path:       "/" + chainName,
			give:       []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]`),
			wantStatus: http.StatusOK, // as geth answers it
			wantCode:   jrpc.CodeParseError,
		},
		{
			name:       "unknown chain",
			path:       "/nochain",
			give:       []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`),
			wantStatus: http.StatusNotFound,
			wantCode:   jrpc.CodeUnknownChain,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := int64(len(tt.give))
			var body io.Reader = bytes.NewReader(tt.give)
			if tt.chunked {
				size = -1
				body = io.MultiReader(body) // hides the length from net/http
			}
			status, out, err := postReader("http://"+v.rpcAddr+tt.path, body, size)
			if err != nil {
				t.Fatalf("post: %v", err)
			}
			if tt.wantStatus != 0 && status != tt.wantStatus {
				t.Errorf("HTTP status %d, want %d (body %.200s)", status, tt.wantStatus, out)
			}
			var r reply
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("answer is not one JSON-RPC object: %v: %.200s", err, out)
			}
			if r.JSONRPC != "2.0" || r.Error == nil || r.Result != nil {
				t.Fatalf("want a JSON-RPC 2.0 error object, got %.300s", out)
			}
			if r.Error.Code != tt.wantCode {
				t.Errorf("error code %d (%q), want %d", r.Error.Code, r.Error.Message, tt.wantCode)
			}
		})
	}

	t.Run("oversized headers are refused", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, v.URL(chainName), bytes.NewReader(batchOf(1)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Padding", strings.Repeat("a", 128<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("128 KiB of headers: HTTP %d, want 431", resp.StatusCode)
		}
	})

	t.Run("batch at max_batch_items is served", func(t *testing.T) {
		status, out, err := post(v.URL(chainName), batchOf(testMaxBatchItems))
		if err != nil || status != http.StatusOK {
			t.Fatalf("HTTP %d, %v: %.200s", status, err, out)
		}
		var answers []reply
		if err := json.Unmarshal(out, &answers); err != nil || len(answers) != testMaxBatchItems {
			t.Fatalf("want %d answers, got %.300s (%v)", testMaxBatchItems, out, err)
		}
		for i, a := range answers {
			if a.Error != nil || string(a.Result) != `"0x539"` {
				t.Errorf("answer %d: %+v %s, want result 0x539", i, a.Error, a.Result)
			}
		}
	})
}

// batchOf is a batch of n eth_chainId calls.
func batchOf(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"eth_chainId","params":[]}`, i+1)
	}
	b.WriteByte(']')
	return b.Bytes()
}

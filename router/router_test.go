package router

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
)

func TestRouter(t *testing.T) {
	var sent []string
	remotes := jrpc.HandlerFunc(func(_ context.Context, req *jrpc.Request) (json.RawMessage, error) {
		sent = append(sent, req.Method)
		return json.RawMessage(`"0x10"`), nil
	})
	rt := New(Config{Chain: "polygon", ChainID: 137}, remotes)

	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_chainId"})
	if err != nil || string(res) != `"0x89"` {
		t.Fatalf("eth_chainId = %s, %v; want \"0x89\" from config", res, err)
	}
	for _, m := range []string{"eth_subscribe", "eth_unsubscribe"} {
		_, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: m})
		var je *jrpc.Error
		if !errors.As(err, &je) || je.Code != jrpc.CodeMethodNotFound {
			t.Errorf("%s: err = %v, want -32601 as geth answers over HTTP", m, err)
		}
	}
	if res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_blockNumber"}); err != nil || string(res) != `"0x10"` {
		t.Fatalf("eth_blockNumber = %s, %v; want the remotes' answer", res, err)
	}
	if len(sent) != 1 || sent[0] != "eth_blockNumber" {
		t.Fatalf("remotes saw %v, want only eth_blockNumber", sent)
	}
}

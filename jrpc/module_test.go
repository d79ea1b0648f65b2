package jrpc

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
)

// The fx wiring gives a working server from supplied Options.
func TestModule(t *testing.T) {
	var srv *Server
	app := fxtest.New(t, fx.Supply(Options{}), Module, fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	srv.Handle("c", HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) {
		return json.RawMessage(`"ok"`), nil
	}))
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := ts.Client().Post(ts.URL+"/c", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Response
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || string(got.Result) != `"ok"` {
		t.Fatalf("answer %+v, %v", got, err)
	}
}

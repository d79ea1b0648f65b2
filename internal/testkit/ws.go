package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsTimeout bounds one WebSocket write or read of a test.
const wsTimeout = 5 * time.Second

// WSWrite writes msg as one text message, failing the test if it cannot.
func WSWrite(t testing.TB, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsTimeout)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("ws write: %v", err)
	}
}

// WSRead reads one message, failing the test if none comes.
func WSRead(t testing.TB, c *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsTimeout)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("ws read: %v", err)
	}
	return string(b)
}

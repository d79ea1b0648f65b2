package testkit

import "testing"

// RecvUntil receives from a stream (a gRPC client stream's Recv) until a
// message ok accepts, and returns it; an error on the way fails the test,
// naming what was awaited. The stream's context bounds the wait.
func RecvUntil[T any](t testing.TB, what string, recv func() (T, error), ok func(T) bool) T {
	t.Helper()
	for {
		m, err := recv()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok(m) {
			return m
		}
	}
}

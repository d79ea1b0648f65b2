// Package pgtest gives each test its own database on the real Postgres at
// 127.0.0.1:5432 ($VENN_TEST_POSTGRES overrides the server URL), with
// venn's migrations applied, and drops it when the test ends. A missing
// server fails the test rather than skipping it. A Proxy stands between
// a test and the server for the test to take Postgres away and bring it
// back.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/migrations"
)

// DefaultServer is the server tests use without $VENN_TEST_POSTGRES: trust
// auth, user root.
const DefaultServer = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"

const envServer = "VENN_TEST_POSTGRES"

// setupTimeout bounds creating, migrating and dropping a database.
const setupTimeout = time.Minute

// Server returns the URL of the test server's maintenance database.
func Server() string {
	if s := os.Getenv(envServer); s != "" {
		return s
	}
	return DefaultServer
}

// New creates an empty database, migrated, and returns its URL; the
// database is dropped (with its connections) when the test ends.
func New(t testing.TB) string {
	t.Helper()
	u := Empty(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if _, err := migrations.Up(ctx, u, nil); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return u
}

// Empty creates an empty database, not migrated, and returns its URL; the
// database is dropped when the test ends.
func Empty(t testing.TB) string {
	t.Helper()
	server := Server()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("pgtest: Postgres at %s is unreachable; these tests need a real server there (or $%s): %v", server, envServer, err)
	}
	defer admin.Close(context.Background())
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "venn_test_" + hex.EncodeToString(suffix[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		admin, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, server, name)
}

// withDatabase returns server's URL naming database name.
func withDatabase(t testing.TB, server, name string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("pgtest: server URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs statements on the database at u, failing the test on error.
func Exec(t testing.TB, u, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("pgtest: %.100s: %v", sql, err)
	}
}

// Name returns the database name of a URL New or Empty returned.
func Name(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(p.Path, "/")
}

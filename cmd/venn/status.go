package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/venn-gateway/venn/admin"
)

// defaultAdminURL is where venn status looks without --admin: the
// admin_listen the README suggests.
const defaultAdminURL = "http://127.0.0.1:9546"

// statusTimeout bounds the whole status call.
const statusTimeout = 15 * time.Second

// status prints a running replica's overview from its admin API.
func status(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("admin", envOr("VENN_ADMIN_URL", defaultAdminURL), "the replica's admin API (env VENN_ADMIN_URL)")
	token := fs.String("token", "", "an admin token (default: env VENN_ADMIN_TOKEN)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "venn status: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *token == "" {
		*token = os.Getenv("VENN_ADMIN_TOKEN")
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	o, err := admin.Fetch(ctx, http.DefaultClient, *url, *token)
	if err != nil {
		fmt.Fprintf(stderr, "venn status: %v\n", err)
		return exitError
	}
	if err := admin.Print(stdout, o, time.Now()); err != nil {
		fmt.Fprintf(stderr, "venn status: %v\n", err)
		return exitError
	}
	return exitOK
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

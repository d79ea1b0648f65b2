package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// probe asks one of venn's own endpoints (/healthz, /readyz) and exits 0
// on a 2xx answer. The image is distroless, with no shell, curl or wget: a
// container health check (docker-compose.yml) has only venn to run.
func probe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "time for the whole request")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: venn probe [--timeout 2s] URL")
		return exitUsage
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintln(stderr, "venn probe: URL must be http:// or https:// with a host")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "venn probe: %v\n", err)
		return exitError
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "venn probe: %v\n", err)
		return exitError
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "venn probe: %s\n", resp.Status)
		return exitError
	}
	fmt.Fprintln(stdout, resp.Status)
	return exitOK
}

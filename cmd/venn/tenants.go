package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/edge"
)

// tenantsCmd writes and lists the tenants and API keys kept in Redis:
// venn tenants --config FILE list | put-tenant FILE | put-key FILE |
// delete-tenant NAME | delete-key NAME. An entry is checked against the
// config file (its chains, its tenants) before it is written; a key's
// secret is stored as its SHA-256 only, and never printed.
func tenantsCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tenants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file with redis and auth.redis (required)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	op, arg := fs.Arg(0), fs.Arg(1)
	if want := map[string]int{"list": 1, "put-tenant": 2, "put-key": 2, "delete-tenant": 2, "delete-key": 2}[op]; want == 0 || fs.NArg() != want {
		fmt.Fprintln(stderr, "venn tenants: want list, put-tenant FILE, put-key FILE, delete-tenant NAME or delete-key NAME")
		return exitUsage
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "venn tenants: --config is required")
		return exitUsage
	}
	cfg, err := app.Load(*configPath)
	if err != nil {
		printErrors(stderr, err)
		return exitError
	}
	if !cfg.Edge.Auth.Redis.Enabled {
		fmt.Fprintf(stderr, "venn tenants: auth.redis.enabled is not set in %s: replicas would not read what is written\n", *configPath)
		return exitError
	}
	store, chains, closeStore, err := cfg.ScopeStore()
	if err != nil {
		fmt.Fprintf(stderr, "venn tenants: %v\n", err)
		return exitError
	}
	defer func() { _ = closeStore() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t := tenantsOp{ctx: ctx, store: store, base: cfg.Edge, chains: chains, stdout: stdout}
	switch op {
	case "list":
		err = t.list()
	case "put-tenant", "put-key":
		err = t.put(op == "put-key", arg, stdin)
	case "delete-tenant", "delete-key":
		err = t.del(op == "delete-key", arg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "venn tenants %s: %v\n", op, err)
		return exitError
	}
	return exitOK
}

type tenantsOp struct {
	ctx    context.Context
	store  *edge.ScopeStore
	base   edge.Config
	chains []string
	stdout io.Writer
}

// list prints the stored tenants and keys as YAML (keys by hash).
func (t tenantsOp) list() error {
	st, bad, err := t.store.Load(t.ctx)
	if err != nil {
		return err
	}
	out := struct {
		Version int64         `yaml:"version"`
		Tenants []edge.Tenant `yaml:"tenants"`
		Keys    []edge.APIKey `yaml:"keys"`
		Bad     []string      `yaml:"unreadable,omitempty"`
	}{Version: st.Version, Tenants: st.Tenants, Keys: st.Keys}
	for _, b := range bad {
		out.Bad = append(out.Bad, b.Error())
	}
	enc := yaml.NewEncoder(t.stdout)
	defer enc.Close()
	return enc.Encode(out)
}

// put reads one entry from file (- for stdin), checks it and writes it.
func (t tenantsOp) put(key bool, file string, stdin io.Reader) error {
	var text []byte
	var err error
	if file == "-" {
		text, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	} else {
		text, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	st, _, err := t.store.Load(t.ctx)
	if err != nil {
		return err
	}
	if key {
		var k edge.APIKey
		if err := edge.DecodeStored(text, &k); err != nil {
			return fmt.Errorf("not a key: %v", err)
		}
		if err := edge.CheckStored(t.base, st, k, t.chains); err != nil {
			return err
		}
		if err := t.store.PutKey(t.ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(t.stdout, "key %s written\n", k.Name)
		return nil
	}
	var tn edge.Tenant
	if err := edge.DecodeStored(text, &tn); err != nil {
		return fmt.Errorf("not a tenant: %v", err)
	}
	if err := edge.CheckStored(t.base, st, tn, t.chains); err != nil {
		return err
	}
	if err := t.store.PutTenant(t.ctx, tn); err != nil {
		return err
	}
	fmt.Fprintf(t.stdout, "tenant %s written\n", tn.Name)
	return nil
}

func (t tenantsOp) del(key bool, name string) error {
	kind, del := "tenant", t.store.DeleteTenant
	if key {
		kind, del = "key", t.store.DeleteKey
	}
	ok, err := del(t.ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no stored %s %q", kind, name)
	}
	fmt.Fprintf(t.stdout, "%s %s deleted\n", kind, name)
	return nil
}

package admin

import (
	"fmt"
	"strings"

	"github.com/venn-gateway/venn/remotes/wire"
	"go.yaml.in/yaml/v3"
)

const redacted = "[redacted]"

// secretFields are the config fields whose values are secrets, whatever
// section they are in: URLs carry API keys and passwords (remotes, Redis,
// Postgres), headers carry keys, and tokens and keys are what they say.
// Under them every value is redacted, keys of a map (header names) kept.
var secretFields = map[string]bool{
	"url": true, "ws_url": true, "urls": true, "headers": true, "token": true, "key": true,
	"password": true, "secret": true, "dsn": true, "api_key": true, "authorization": true,
}

// Redact returns cfg (a struct with yaml tags, the config) as a JSON-ready
// tree with every secret replaced by "[redacted]": the values of
// secretFields, and of every URL (urlFields, and anything elsewhere that
// looks like one) all but its scheme, public host and port
// (wire.RedactURL, the rule logs, errors and status share).
func Redact(cfg any) (any, error) {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	redactNode(&n)
	var out any
	if err := n.Decode(&out); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return out, nil
}

func redactNode(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			redactNode(c)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			// A section that shares a secret's name (rate_limits.key) is
			// walked like any other; headers and lists are all secret.
			name := strings.ToLower(k.Value)
			switch {
			case urlFields[name] && v.Kind != yaml.MappingNode:
				redactURLs(v)
			case secretFields[name] && (v.Kind != yaml.MappingNode || k.Value == "headers"):
				redactAll(v)
			default:
				redactNode(v)
			}
		}
	case yaml.ScalarNode:
		if strings.Contains(n.Value, "://") {
			setScalar(n, wire.RedactURL(n.Value))
		}
	}
}

// urlFields are the secret fields that hold URLs: shown by the one rule
// of logs, errors and status (wire.RedactURL): scheme, a public host
// and port; a private host, user info, path and query redacted.
var urlFields = map[string]bool{"url": true, "ws_url": true, "urls": true, "dsn": true}

// redactURLs redacts every URL under n by wire.RedactURL; any other
// value whole.
func redactURLs(n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		if strings.Contains(n.Value, "://") {
			setScalar(n, wire.RedactURL(n.Value))
		} else if n.Value != "" && n.Tag != "!!null" {
			setScalar(n, redacted)
		}
	default:
		for _, c := range n.Content {
			redactURLs(c)
		}
	}
}

// redactAll redacts every value under n; of a URL its scheme is kept.
func redactAll(n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		if scheme, _, ok := strings.Cut(n.Value, "://"); ok && !strings.ContainsAny(scheme, "@:/") {
			setScalar(n, scheme+"://"+redacted)
		} else if n.Value != "" && n.Tag != "!!null" {
			setScalar(n, redacted)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			redactAll(n.Content[i])
		}
	default:
		for _, c := range n.Content {
			redactAll(c)
		}
	}
}

func setScalar(n *yaml.Node, v string) {
	n.Value, n.Tag, n.Style = v, "!!str", 0
}

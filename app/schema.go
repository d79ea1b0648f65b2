package app

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// The file's shape is read off the config types themselves: their yaml
// tags give each field path its Go type, which checks enum values with
// their own UnmarshalText and words the decoder's messages.

// walkYAML calls fn for every mapping value and sequence item under n with
// its field path (chains[0].remotes[1].url, methods.allow[0]); key is the
// mapping key, nil for a sequence item.
func walkYAML(n *yaml.Node, path string, fn func(path string, key, val *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkYAML(c, path, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			fn(p, key, val)
			walkYAML(val, p, fn)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			fn(p, nil, c)
			walkYAML(c, p, fn)
		}
	}
}

// nodeLine is where a field starts: its key's line, or a list item's own.
func nodeLine(key, val *yaml.Node) int {
	if key != nil {
		return key.Line
	}
	return val.Line
}

// yamlField is one key of a struct in the file and the type it decodes to.
type yamlField struct {
	key string
	typ reflect.Type
}

// yamlFields lists a struct's yaml keys in field order, inlined structs
// included, as the decoder reads them.
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
			out = append(out, yamlFields(f.Type)...)
			continue
		case name == "":
			name = strings.ToLower(f.Name)
		}
		out = append(out, yamlField{name, f.Type})
	}
	return out
}

// checkText decodes every scalar under n that lands in an
// encoding.TextUnmarshaler (an enum) of type t. The decoder would stop at
// the first bad one; here each is reported with its path and line, then
// set to null so that decoding goes on and the default takes its place;
// bad collects the paths reported.
func checkText(n *yaml.Node, t reflect.Type, path string, errs *[]error, bad map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	each := func(p string, key, val *yaml.Node, vt reflect.Type) {
		if !textScalar(p, key, val, vt, errs) {
			bad[p] = true
			return
		}
		checkText(val, vt, p, errs, bad)
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			checkText(c, t, path, errs, bad)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if j := slices.IndexFunc(fields, func(f yamlField) bool { return f.key == k }); j >= 0 {
				each(joinPath(path, k), n.Content[i], n.Content[i+1], fields[j].typ)
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			each(joinPath(path, n.Content[i].Value), n.Content[i], n.Content[i+1], t.Elem())
		}
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, c := range n.Content {
			each(fmt.Sprintf("%s[%d]", path, i), nil, c, t.Elem())
		}
	}
}

// textScalar checks one value of type t; false when it is an enum value
// that does not decode (reported, and nulled).
func textScalar(path string, key, val *yaml.Node, t reflect.Type, errs *[]error) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if val.Kind != yaml.ScalarNode || val.Tag == "!!null" || !reflect.PointerTo(t).Implements(textUnmarshaler) {
		return true
	}
	u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
	if err := u.UnmarshalText([]byte(val.Value)); err != nil {
		*errs = append(*errs, fmt.Errorf("%s (line %d): %v", path, nodeLine(key, val), err))
		val.Tag, val.Value, val.Style = "!!null", "", 0
		return false
	}
	return true
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// typeWords turns the Go types in decoder messages ("field x not found in
// type chain.Config") into the file's words ("a chain"), for every
// struct reachable from root: a list item is named by its type ("a
// consensus rule") or else its list ("a remote"), a section by the first
// key it is under ("rate_limit"), root is "the top level".
func typeWords(root reflect.Type) *strings.Replacer {
	var pairs []string
	seen := map[reflect.Type]bool{}
	add := func(t reflect.Type, word string) {
		pairs = append(pairs, "type "+t.String(), word, t.String(), word)
	}
	var visit func(t reflect.Type, key string, item bool)
	visit = func(t reflect.Type, key string, item bool) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() == reflect.Slice {
			if e := t.Elem(); e.Kind() == reflect.Struct && !seen[e] {
				pairs = append(pairs, "[]"+e.String(), "a list of "+plural(itemWord(e, key)))
			}
			visit(t.Elem(), key, true)
			return
		}
		if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() == "time" {
			return
		}
		seen[t] = true
		switch {
		case t == root:
			add(t, "the top level")
		case item:
			add(t, article(itemWord(t, key)))
		default:
			add(t, key)
		}
		for _, f := range yamlFields(t) {
			visit(f.typ, f.key, false)
		}
	}
	visit(root, "", false)
	pairs = append(pairs, "time.Duration", "a duration (like 10s)")
	return strings.NewReplacer(sortedPairs(pairs)...)
}

// sortedPairs orders old/new pairs longest old first, so that no name is
// replaced inside a longer one.
func sortedPairs(pairs []string) []string {
	type pair struct{ old, new string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.old) - len(a.old) })
	out := make([]string, 0, len(pairs))
	for _, p := range ps {
		out = append(out, p.old, p.new)
	}
	return out
}

// itemWord names one item of a list of t under key: the type's name in
// words without "Config" (HedgeGroupConfig: "hedge group"), or the list's
// key made singular when the type is just Config (remotes: "remote"). A
// generic type's name loses its type arguments and gains the key
// (consensus.Rule[Tier] under consensus: "consensus rule").
func itemWord(t reflect.Type, key string) string {
	name, _, generic := strings.Cut(t.Name(), "[")
	if w := camelWords(strings.TrimSuffix(name, "Config")); w != "" {
		if generic && key != "" {
			return key + " " + w
		}
		return w
	}
	return strings.TrimSuffix(key, "s")
}

// camelWords splits a Go name into lower-case words: APIKey is "api key".
func camelWords(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		upper := unicode.IsUpper(r)
		if i > 0 && upper && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

func plural(word string) string {
	if strings.HasSuffix(word, "s") {
		return word
	}
	return word + "s"
}

// unknownKeys reports every key under n that no field of type t has, with
// the closest known key at that level when one is close ("did you mean");
// their paths go to bad. The decoder's strict mode would say the same
// without the suggestion, and only on a re-encoded document whose lines
// are not the file's.
func unknownKeys(n *yaml.Node, t reflect.Type, path string, errs *[]error, bad map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return // a scalar of its own
	}
	switch {
	case n.Kind == yaml.DocumentNode:
		for _, c := range n.Content {
			unknownKeys(c, t, path, errs, bad)
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := joinPath(path, key.Value)
			j := slices.IndexFunc(fields, func(f yamlField) bool { return f.key == key.Value })
			if j >= 0 {
				unknownKeys(val, fields[j].typ, p, errs, bad)
				continue
			}
			msg := fmt.Sprintf("%s (line %d): field %s not found in %s", p, key.Line, key.Value, configWords.Replace("type "+t.String()))
			if near := closestKey(key.Value, fields); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			*errs = append(*errs, errors.New(msg))
			bad[p] = true
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), errs, bad)
		}
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, c := range n.Content {
			unknownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs, bad)
		}
	}
}

// closestKey is the known key nearest to key by edit distance, "" when
// none is near enough to be the one meant: at most a third of the key's
// length away (and at least 1, for short keys).
func closestKey(key string, fields []yamlField) string {
	best, bestDist := "", max(1, len(key)/3)+1
	for _, f := range fields {
		if d := levenshtein(key, f.key); d < bestDist {
			best, bestDist = f.key, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of bytes; keys are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

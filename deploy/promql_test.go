package deploy

import (
	"errors"
	"fmt"
	"strings"
)

// PromQL's words that are not metric names where an identifier stands:
// operators, modifiers and aggregations (which may come before by (...)).
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// promqlLabelLists are the words whose ( ... ) holds label names.
var promqlLabelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// selectorNames returns the metric names of expr's selectors. It reads
// PromQL's lexical shape, not its grammar (the Prometheus parser would make
// this test module depend on all of Prometheus): strings, { } matchers and
// [ ] ranges are skipped, an identifier before ( is a function, label
// lists after by, on ... are skipped, and every other identifier that is
// not an operator is a metric name. A selector with only matchers ({...}
// alone) is an error: the test could not say what it selects. Syntax is
// promtool's to judge (TestPromtool).
func selectorNames(expr string) ([]string, error) {
	var names []string
	s := expr
	prevIdent := "" // the identifier just before, for label lists
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := closing(s, i)
			if j < 0 {
				return names, errors.New("unterminated string")
			}
			i = j + 1
		case c == '{' || c == '[':
			if c == '{' && !endsSelector(s[:i]) {
				return names, fmt.Errorf("a selector without a metric name at %q", s[i:])
			}
			j := matching(s, i)
			if j < 0 {
				return names, fmt.Errorf("unbalanced %c", c)
			}
			i = j + 1
		case c == '(' && promqlLabelLists[prevIdent]:
			j := matching(s, i)
			if j < 0 {
				return names, errors.New("unbalanced (")
			}
			i, prevIdent = j+1, ""
		case isIdentStart(c) && (i == 0 || !isIdentChar(s[i-1]) && s[i-1] != '.'):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			word := s[i:j]
			next := strings.TrimLeft(s[j:], " \t\n")
			switch {
			case promqlLabelLists[word], promqlWords[strings.ToLower(word)]:
			case strings.HasPrefix(next, "("):
				// a function
			default:
				names = append(names, word)
			}
			i, prevIdent = j, word
		default:
			if c != ' ' && c != '\t' && c != '\n' {
				prevIdent = ""
			}
			i++
		}
	}
	return names, nil
}

// endsSelector says whether before ends in a metric name, so that a { is
// its matchers.
func endsSelector(before string) bool {
	before = strings.TrimRight(before, " \t\n")
	return before != "" && isIdentChar(before[len(before)-1])
}

// closing is the index of the quote that ends the string opening at i.
func closing(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j
		}
	}
	return -1
}

// matching is the index of the bracket that closes the one at i, strings
// inside skipped.
func matching(s string, i int) int {
	open := s[i]
	end := map[byte]byte{'(': ')', '{': '}', '[': ']'}[open]
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			k := closing(s, j)
			if k < 0 {
				return -1
			}
			j = k
		case open:
			depth++
		case end:
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

package app

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ${ENV} expansion in config values (Parse expands the parsed scalars,
// never the text).

// flowEnvLine returns the first line (from 1) where an unquoted ${ sits
// inside a flow collection, or 0. It only words a syntax error, so a rough
// scan will do: a quote, { or [ counts only where a value starts.
func flowEnvLine(data []byte) int {
	depth := 0
	for i, line := range strings.Split(string(data), "\n") {
		var quote byte
		valueStart := true // only blanks so far, or after ": ", "- ", ",", "{", "["
		for j := 0; j < len(line); j++ {
			c := line[j]
			if quote != 0 {
				if c == '\\' && quote == '"' {
					j++
				} else if c == quote {
					quote = 0
				}
				continue
			}
			switch {
			case c == ' ' || c == '\t':
				continue // keeps valueStart
			case c == '#' && (j == 0 || line[j-1] == ' ' || line[j-1] == '\t'):
				j = len(line) // a comment
				continue
			case strings.HasPrefix(line[j:], "${"):
				if depth > 0 {
					return i + 1
				}
				if k := strings.IndexByte(line[j:], '}'); k > 0 {
					j += k
				}
			case valueStart && (c == '"' || c == '\''):
				quote = c
			case valueStart && (c == '{' || c == '['):
				depth++
			case depth > 0 && (c == '}' || c == ']'):
				depth--
			}
			valueStart = c == '{' || c == '[' || c == ',' ||
				((c == ':' || c == '-') && (j+1 == len(line) || line[j+1] == ' '))
		}
	}
	return 0
}

// hideEnvValue drops the value a decoder message quotes (all of it up to
// 10 bytes, else the first 7 and "...") when it came from the environment:
// it may be a secret, and the file already names the variable.
func hideEnvValue(msg string, expanded []string) string {
	for _, v := range expanded {
		if len(v) > 10 {
			v = v[:7] + "..."
		}
		msg = strings.ReplaceAll(msg, " `"+v+"`", " (a value from the environment)")
	}
	return msg
}

// envName is what ${...} may name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandEnv replaces ${NAME} and ${NAME:-default} in one config value.
// Unlike os.Expand it leaves a bare $ alone (secrets and regexps contain
// them); "$${" writes a literal "${". A default applies when NAME is unset
// or empty, as in the shell. Every unset name without a default is
// reported.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []error) {
	var (
		out  strings.Builder
		errs []error
	)
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			out.WriteString(s[:i-1])
			out.WriteString("${")
			s = s[i+2:]
			continue
		}
		out.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			errs = append(errs, errors.New("unclosed ${"))
			out.WriteString(s[i:])
			break
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("bad variable name %q", name))
			continue
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
		}
		out.WriteString(v)
	}
	return out.String(), errs
}

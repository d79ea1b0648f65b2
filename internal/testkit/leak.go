package testkit

import (
	"regexp"
	"strconv"
	"strings"
)

// escapes is one layer of every escape a remote's text may use: JSON
// (\/ \\ \" \' \u00XX \xXX), percent-encoding and HTML entities, each
// standing for an ASCII character.
var escapes = regexp.MustCompile(`\\u00([0-7][0-9a-fA-F])|\\x([0-7][0-9a-fA-F])|\\(["\\/'])|%([0-7][0-9a-fA-F])|&(amp|quot|lt|gt|apos);|&#([0-9]{1,7});|&#[xX]([0-9a-fA-F]{1,6});`)

func unescapeOnce(s string) string {
	return escapes.ReplaceAllStringFunc(s, func(m string) string {
		g := escapes.FindStringSubmatch(m)
		switch {
		case g[1] != "":
			v, _ := strconv.ParseUint(g[1], 16, 8)
			return string(rune(v))
		case g[2] != "":
			v, _ := strconv.ParseUint(g[2], 16, 8)
			return string(rune(v))
		case g[3] != "":
			return g[3]
		case g[4] != "":
			v, _ := strconv.ParseUint(g[4], 16, 8)
			return string(rune(v))
		case g[5] != "":
			return map[string]string{"amp": "&", "quot": `"`, "lt": "<", "gt": ">", "apos": "'"}[g[5]]
		case g[6] != "":
			if v, _ := strconv.Atoi(g[6]); v < 0x80 {
				return string(rune(v))
			}
		case g[7] != "":
			if v, _ := strconv.ParseUint(g[7], 16, 32); v < 0x80 {
				return string(rune(v))
			}
		}
		return m
	})
}

// Leaked reports the secret of secrets that text holds, in any letter case
// and under up to depth layers of escaping, or "": the oracle the tests of
// redaction hold every client error and log to, decoding with code of its
// own rather than the redactor's.
func Leaked(text string, secrets []string, depth int) string {
	for ; depth >= 0; depth-- {
		low := strings.ToLower(text)
		for _, s := range secrets {
			if strings.Contains(low, strings.ToLower(s)) {
				return s
			}
		}
		text = unescapeOnce(low)
	}
	return ""
}

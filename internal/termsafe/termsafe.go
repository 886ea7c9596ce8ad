// Package termsafe makes text that came from a guest safe to show on a terminal: a guest's agent
// answers, its error texts and its command output go to users' terminals, where control
// characters would steer the terminal and bidirectional overrides disguise the text.
package termsafe

import (
	"strings"
	"unicode"
)

// Printable drops control characters (C0, C1, DEL; newline and tab kept) and bidirectional
// overrides from s; invalid UTF-8 becomes "?".
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// Line is Printable on one line: runs of white space, newlines included, become one space.
func Line(s string) string {
	return strings.Join(strings.Fields(Printable(s)), " ")
}

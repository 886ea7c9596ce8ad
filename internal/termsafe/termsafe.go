// Package termsafe makes text from the far end safe to show on a terminal: a guest's agent answers,
// its error texts and its command output, a server's Status or a stream's close reason go to users'
// terminals (perhaps in raw mode), where control characters would steer the terminal and
// bidirectional overrides disguise the text.
package termsafe

import (
	"strings"
	"unicode"
)

// Printable replaces control characters (C0, C1, DEL; newline and tab kept), bidirectional
// overrides and invalid UTF-8 in s with '?', so that the reader sees something was there.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// Line is Printable on one line: runs of white space, newlines included, become one space.
func Line(s string) string {
	return strings.Join(strings.Fields(Printable(s)), " ")
}

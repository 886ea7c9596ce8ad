package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQueryStripper(t *testing.T) {
	for in, want := range map[string]string{
		"vm-cirros# \x1b[6n":                      "vm-cirros# ",
		"a\x1b[5nb\x1b[?6nc":                      "abc",
		"\x1b[c\x1b[0c\x1b[>c\x1b[=cok":           "ok",
		"\x1b[?2004$p\x1b[>q\x1b[>0qok":           "ok",
		"\x1b[18t\x1b[14;2tok":                    "ok",
		"\x1b]11;?\x07\x1b]4;1;?\x1b\\ok":         "ok",
		"\x1bP$qm\x1b\\\x1bP+q6b63757531\x1b\\ok": "ok",
		"\x1bZok":                                    "ok",
		"\x1b[1;31mred\x1b[0m \x1b[2J\x1b[H":         "\x1b[1;31mred\x1b[0m \x1b[2J\x1b[H",
		"\x1b[8;24;80t\x1b]0;title\x07\x1b7\x1b8":    "\x1b[8;24;80t\x1b]0;title\x07\x1b7\x1b8",
		"\x1b\x1b[6nx":                               "\x1bx",
		"plain text, no escapes\r\n":                 "plain text, no escapes\r\n",
		"\x1b[6":                                     "\x1b[6",
		"\x1b]" + strings.Repeat("x", 100) + "\x07!": "\x1b]" + strings.Repeat("x", 100) + "\x07!",
		// Hidden or abandoned queries: a terminal restarts at an ESC, and reads numbers as numbers.
		"\x1b[\x1b[6nok":       "\x1b[ok",
		"\x1b]0;t\x1b[6nok":    "\x1b]0;tok",
		"\x1b[021tok":          "ok",
		"\x1b]4;1;?;2;?\x07ok": "ok",
		"\x1b[" + strings.Repeat("0", 600) + "6nok":     "ok",
		"\x1b]0;" + strings.Repeat("t", 600) + "\x07ok": "ok",
		"\x1bP" + strings.Repeat("t", 600) + "\x1b\\ok": "ok",
	} {
		// Whole, and split at every byte: a sequence across frames is judged the same.
		for cut := 0; cut <= len(in); cut++ {
			var q queryStripper
			got := string(q.strip([]byte(in[:cut]))) + string(q.strip([]byte(in[cut:]))) + string(q.flush())
			assert.Equal(t, want, got, "input %q cut at %d", in, cut)
		}
	}
}

func TestQueryStripperBoundsWhatItHolds(t *testing.T) {
	var q queryStripper
	out := q.strip([]byte("\x1b[" + strings.Repeat("1;", 1000)))
	assert.LessOrEqual(t, len(q.held), maxQueryLength)
	assert.Empty(t, out, "a sequence past the bound is dropped whole")
	assert.Equal(t, " after", string(q.strip([]byte("m after"))), "up to its final byte")
}

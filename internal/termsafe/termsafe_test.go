package termsafe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A far end's text reaches the user's terminal with its control characters defused.
func TestPrintable(t *testing.T) {
	assert.Equal(t, "?[2J?31mred\tok?\n", Printable("\x1b[2J\u009b31mred\tok\r\n"), "ESC, CSI (C1) and CR replaced")
	assert.Equal(t, "a?b?c", Printable("a\u202eb\u2066c"), "bidi overrides replaced")
	assert.Equal(t, "bad ? byte", Printable("bad \xff byte"))
	assert.Equal(t, "one two three?", Line(" one\ntwo\t\tthree\r\n"))
	assert.Equal(t, "gone ?]2;owned?? ok é", Line("gone \x1b]2;owned\x07\u009b ok é"))
}

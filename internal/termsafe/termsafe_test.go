package termsafe

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrintable(t *testing.T) {
	assert.Equal(t, "[2J31mred\tok\n", Printable("\x1b[2J\u009b31mred\tok\r\n"), "ESC, CSI (C1) and CR dropped")
	assert.Equal(t, "abc", Printable("a\u202eb\u2066c"), "bidi overrides dropped")
	assert.Equal(t, "bad ? byte", Printable("bad \xff byte"))
	assert.Equal(t, "one two three", Line(" one\ntwo\t\tthree\r\n"))
}

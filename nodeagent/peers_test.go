package nodeagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// One peer's word is enough only when it is the only one asked: with more, one compromised node
// alone cannot keep another node's guests running.
func TestConfirmsNeedsAQuorum(t *testing.T) {
	for _, tc := range []struct {
		yes, asked int
		want       bool
	}{{0, 0, false}, {0, 1, false}, {1, 1, true}, {1, 2, false}, {2, 2, true}, {1, 3, false}, {2, 3, true}, {3, 3, true}} {
		assert.Equal(t, tc.want, confirms(tc.yes, tc.asked), "%d yes of %d asked", tc.yes, tc.asked)
	}
}

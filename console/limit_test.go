package console

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLimiter(t *testing.T) {
	l := &Limiter{}
	r1, ok := l.Acquire("alice", 2)
	assert.True(t, ok)
	_, ok = l.Acquire("alice", 2)
	assert.True(t, ok)
	_, ok = l.Acquire("alice", 2)
	assert.False(t, ok, "a third stream of alice's is refused")
	_, ok = l.Acquire("bob", 2)
	assert.True(t, ok, "bob has his own slots")
	r1()
	r1() // releasing twice frees one slot only
	_, ok = l.Acquire("alice", 2)
	assert.True(t, ok)
	_, ok = l.Acquire("alice", 2)
	assert.False(t, ok)
}

package console

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guest plays a serial console on the far end of a pipe.
func guest(t *testing.T) (dial func() (net.Conn, error), far net.Conn, dials *int) {
	t.Helper()
	n := 0
	near, far := net.Pipe()
	t.Cleanup(func() { far.Close() })
	return func() (net.Conn, error) { n++; return near, nil }, far, &n
}

func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	buf := make([]byte, n)
	_, err := io.ReadFull(r, buf)
	require.NoError(t, err)
	return string(buf)
}

func TestHubSharesOneConsole(t *testing.T) {
	dial, far, dials := guest(t)
	h := &Hub{}
	a, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	b, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	assert.Equal(t, 1, *dials, "one connection to the console for all viewers")
	assert.Equal(t, 2, h.Viewers("ns/vm"))

	_, err = far.Write([]byte("login: "))
	require.NoError(t, err)
	assert.Equal(t, "login: ", readN(t, a, 7), "viewer a sees the output")
	assert.Equal(t, "login: ", readN(t, b, 7), "viewer b sees the same output")

	go func() { _, _ = a.Write([]byte("ls\n")); _, _ = b.Write([]byte("pwd\n")) }()
	in := bufio.NewReader(far)
	line1, _ := in.ReadString('\n')
	line2, _ := in.ReadString('\n')
	assert.ElementsMatch(t, []string{"ls\n", "pwd\n"}, []string{line1, line2}, "both viewers' input reaches the console")

	require.NoError(t, a.Close())
	assert.Equal(t, 1, h.Viewers("ns/vm"))
	require.NoError(t, b.Close())
	assert.Equal(t, 0, h.Viewers("ns/vm"))
	_, err = far.Write([]byte("x"))
	assert.Error(t, err, "the last viewer to leave disconnects from the console")
}

func TestHubCoalescesABurstForASlowReader(t *testing.T) {
	dial, far, _ := guest(t)
	h := &Hub{}
	v, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	for range 1000 { // a booting guest's many small writes, while the viewer reads nothing
		_, err := far.Write([]byte("ab"))
		require.NoError(t, err)
	}
	buf := make([]byte, 2000)
	n, err := io.ReadFull(v, buf)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("ab", 1000), string(buf[:n]), "all the output, in order, none dropped")
	require.NoError(t, v.Close())
}

func TestHubDropsASlowViewer(t *testing.T) {
	dial, far, _ := guest(t)
	h := &Hub{}
	slow, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	fast, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	// Twice the buffer while slow reads nothing: it overflows halfway, well before the writes end.
	chunk := strings.Repeat("o", bufferSize)
	for i := 0; i < 2*viewerBuffer/bufferSize; i++ {
		_, err := far.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, chunk, readN(t, fast, bufferSize), "the fast viewer keeps up")
	}
	// slow is dropped with a reason, not buffered forever: it reads what was queued, then errTooSlow.
	result := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, err = slow.Read(make([]byte, bufferSize))
		}
		result <- err
	}()
	var got error
	select {
	case got = <-result:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow viewer was not dropped")
	}
	assert.True(t, errors.Is(got, errTooSlow), "%v", got)
	assert.Equal(t, 1, h.Viewers("ns/vm"), "the fast viewer stays")
	require.NoError(t, fast.Close())
	_, err = fast.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "a closed viewer reads EOF")
}

// One console takes at most MaxViewers viewers; one more is refused, and a seat frees when a
// viewer leaves.
func TestHubCapsViewers(t *testing.T) {
	dial, _, _ := guest(t)
	h := &Hub{}
	var viewers []*Viewer
	for range MaxViewers {
		v, err := h.Join("ns/vm", dial)
		require.NoError(t, err)
		viewers = append(viewers, v)
	}
	_, err := h.Join("ns/vm", dial)
	require.ErrorIs(t, err, ErrTooManyViewers)
	assert.Contains(t, err.Error(), "16 viewers, the limit")
	require.NoError(t, viewers[0].Close())
	v, err := h.Join("ns/vm", dial)
	require.NoError(t, err)
	for _, v := range append(viewers[1:], v) {
		require.NoError(t, v.Close())
	}
}

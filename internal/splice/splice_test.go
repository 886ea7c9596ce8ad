package splice

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcpPair is a connected pair of TCP sockets (both can half-close).
func tcpPair(t *testing.T) (near, far *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	a := <-accepted
	require.NotNil(t, a)
	t.Cleanup(func() { _ = c.Close(); _ = a.Close() })
	return c.(*net.TCPConn), a.(*net.TCPConn)
}

// join runs Join on its own goroutine; the returned channel yields its ending.
func join(ctx context.Context, client, service io.ReadWriteCloser, finish func(Ending)) <-chan Ending {
	out := make(chan Ending, 1)
	go func() { out <- Join(ctx, client, service, finish) }()
	return out
}

// Rule 2: between two half-closable streams, each end is passed on and the other direction goes
// on — a request sent and half-closed still gets its answer, then the join ends.
func TestHalfCloseIsPassedOnBothWays(t *testing.T) {
	clientApp, clientSide := tcpPair(t)
	serviceSide, serviceApp := tcpPair(t)
	ended := join(context.Background(), clientSide, serviceSide, nil)

	_, err := clientApp.Write([]byte("request"))
	require.NoError(t, err)
	require.NoError(t, clientApp.CloseWrite())
	got, err := io.ReadAll(serviceApp) // the service sees the request, then EOF
	require.NoError(t, err)
	assert.Equal(t, "request", string(got))

	_, err = serviceApp.Write([]byte("answer"))
	require.NoError(t, err)
	require.NoError(t, serviceApp.CloseWrite())
	got, err = io.ReadAll(clientApp)
	require.NoError(t, err)
	assert.Equal(t, "answer", string(got), "the answer came back after the client's half-close")
	e := <-ended
	assert.False(t, e.Canceled)
	assert.NoError(t, e.Err)
}

// Rule 3, client: a client's half-close cannot cross to a service that cannot take one; it is
// dropped and the answer still comes back. Rule 1: the service's end (a websocket's close) ends
// the join and the client sees EOF.
func TestClientHalfCloseIsDroppedBeforeAWebsocket(t *testing.T) {
	clientApp, clientSide := tcpPair(t)
	serviceSide, serviceApp := tcpPair(t)
	ended := join(context.Background(), clientSide, whole{serviceSide}, nil)

	_, err := clientApp.Write([]byte("request"))
	require.NoError(t, err)
	require.NoError(t, clientApp.CloseWrite())
	buf := make([]byte, len("request"))
	_, err = io.ReadFull(serviceApp, buf)
	require.NoError(t, err)
	_, err = serviceApp.Write([]byte("answer"))
	require.NoError(t, err)
	require.NoError(t, serviceApp.Close())

	got, err := io.ReadAll(clientApp)
	require.NoError(t, err)
	assert.Equal(t, "answer", string(got))
	e := <-ended
	assert.Equal(t, Service, e.Side, "the service's end ended the join")
	assert.NoError(t, e.Err)
}

// Rule 3, service: a service's half-close that the client's websocket cannot carry ends the join
// (nothing comes after it); finish runs before the streams are closed.
func TestServiceEndEndsAJoinWithAWebsocketClient(t *testing.T) {
	clientApp, clientSide := tcpPair(t)
	serviceSide, serviceApp := tcpPair(t)
	var finished []Ending
	ended := join(context.Background(), whole{clientSide}, serviceSide, func(e Ending) {
		finished = append(finished, e)
		_, _ = clientSide.Write([]byte("bye")) // still open
	})
	_, err := serviceApp.Write([]byte("console output"))
	require.NoError(t, err)
	require.NoError(t, serviceApp.CloseWrite())

	got, err := io.ReadAll(clientApp)
	require.NoError(t, err)
	assert.Equal(t, "console outputbye", string(got))
	e := <-ended
	assert.Equal(t, []Ending{{Side: Service}}, finished)
	assert.Equal(t, Ending{Side: Service}, e)
}

// Rule 1: the client's websocket closing ends the join even though the service could go on.
func TestWebsocketCloseEndsTheJoin(t *testing.T) {
	clientApp, clientSide := tcpPair(t)
	serviceSide, serviceApp := tcpPair(t)
	ended := join(context.Background(), whole{clientSide}, serviceSide, nil)
	require.NoError(t, clientApp.CloseWrite())
	_, err := io.ReadAll(serviceApp) // the service's stream was closed
	require.NoError(t, err)
	assert.Equal(t, Ending{Side: Client}, <-ended)
}

// A write that fails names the side that refused it.
func TestWriteErrorNamesTheRefusingSide(t *testing.T) {
	clientApp, clientSide := tcpPair(t)
	ended := join(context.Background(), clientSide, refusing{closed: make(chan struct{})}, nil)
	_, err := clientApp.Write([]byte("x"))
	require.NoError(t, err)
	e := <-ended
	assert.Equal(t, Service, e.Side)
	assert.ErrorIs(t, e.Err, errRefused)
}

var errRefused = errors.New("refused")

// refusing is a service that answers nothing until closed and refuses every write.
type refusing struct{ closed chan struct{} }

func (r refusing) Read([]byte) (int, error) { <-r.closed; return 0, net.ErrClosed }
func (refusing) Write([]byte) (int, error)  { return 0, errRefused }
func (r refusing) Close() error             { close(r.closed); return nil }

// The context ends a join that would otherwise go on for ever, with its cause; both copies are
// joined (goleak checks).
func TestContextEndsTheJoin(t *testing.T) {
	_, clientSide := tcpPair(t)
	serviceSide, _ := tcpPair(t)
	why := errors.New("server shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	ended := join(ctx, clientSide, serviceSide, nil)
	cancel(why)
	e := <-ended
	assert.True(t, e.Canceled)
	assert.ErrorIs(t, e.Err, why)
}

// A port-forward's client never half-closes (a websocket is behind the node agent), so its end
// ends the join: a guest service that ignores a half-close cannot hold the launcher's connection.
func TestUpgradeClientEndsJoin(t *testing.T) {
	serviceSide, guest := tcpPair(t)
	served := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served <- Upgrade(context.WithoutCancel(r.Context()), w, "tcp", serviceSide, ClientEndsJoin)
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(guest, buf)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite()) // the agent went away; the guest never answers
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the join waits for a guest that ignores the half-close")
	}
	_, err = io.ReadAll(guest)
	require.NoError(t, err, "the guest's connection was closed")
}

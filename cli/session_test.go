package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podvirt/podvirt/console"
)

func TestSessionWatch(t *testing.T) {
	tests := []struct {
		name          string
		after, expect string
		chunks        []string
		wantOpen      bool
		wantMatchAt   int // index of the chunk whose watch reports the --expect match; -1: none
	}{
		{name: "no flags", chunks: []string{"anything"}, wantOpen: true, wantMatchAt: -1},
		{name: "expect alone", expect: `Linux`, chunks: []string{"boot ", "Lin", "ux"}, wantOpen: true, wantMatchAt: 2},
		{name: "after opens on the prompt", after: `login: `, chunks: []string{"boot\n", "log", "in: "}, wantOpen: true, wantMatchAt: -1},
		{name: "after not yet", after: `login: `, chunks: []string{"boot\n", "login"}, wantOpen: false, wantMatchAt: -1},
		{name: "expect ignores what came before the prompt", after: `login: `, expect: `Linux`,
			chunks: []string{"Linux version 6.1\n", "login: ", "uname\n"}, wantOpen: true, wantMatchAt: -1},
		{name: "expect sees what follows the prompt", after: `login: `, expect: `Linux`,
			chunks: []string{"Linux version 6.1\n", "login: ", "Linux guest\n"}, wantOpen: true, wantMatchAt: 2},
		{name: "expect sees the rest of the prompt's chunk", after: `\$ `, expect: `Linux`,
			chunks: []string{"Linux boot\n$ Linux guest\n"}, wantOpen: true, wantMatchAt: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &session{opened: make(chan struct{}), afterSeen: tt.after == ""}
			if tt.after != "" {
				s.after = regexp.MustCompile(tt.after)
			}
			if tt.expect != "" {
				s.expect = regexp.MustCompile(tt.expect)
			}
			matchAt := -1
			for i, c := range tt.chunks {
				if s.watch([]byte(c)) && matchAt < 0 {
					matchAt = i
				}
			}
			assert.Equal(t, tt.wantMatchAt, matchAt)
			if tt.after != "" {
				assert.Equal(t, tt.wantOpen, isClosed(s.opened))
			}
			assert.Equal(t, tt.wantOpen, s.afterSeen)
		})
	}
}

func TestSessionWatchBoundsWhatItKeeps(t *testing.T) {
	s := &session{opened: make(chan struct{}), after: regexp.MustCompile(`never`)}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range 64 { // 4 MiB of output that never matches
		s.watch(chunk)
	}
	assert.LessOrEqual(t, s.seen.Len(), maxExpectBuffer+len(chunk))
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestSessionAfterHoldsInputUntilThePrompt: a guest prints a boot line (with a decoy for --expect),
// watches for input for a while (none may come), then prints its prompt. The input must reach it
// only after the prompt, and --expect must match the answer, not the boot line.
func TestSessionAfterHoldsInputUntilThePrompt(t *testing.T) {
	const window = 300 * time.Millisecond // how long the guest watches for input that must not come
	var mu sync.Mutex
	var early, got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := console.Upgrade(w, r)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("Linux version 6.1 booting\n"))
		reads := make(chan []byte)
		go func() {
			defer close(reads)
			for {
				_, data, err := ws.ReadMessage()
				if err != nil {
					return
				}
				reads <- data
			}
		}()
		prompt := time.After(window)
		released := false
		for {
			select {
			case <-prompt:
				released = true
				_ = ws.WriteMessage(websocket.BinaryMessage, []byte("\nlogin: "))
			case data, ok := <-reads:
				if !ok {
					return
				}
				mu.Lock()
				if released {
					got = append(got, string(data))
				} else {
					early = append(early, string(data))
				}
				mu.Unlock()
				if released {
					_ = ws.WriteMessage(websocket.BinaryMessage, []byte("Linux guest 6.1\n"))
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	ws, _, err := console.Dialer().Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)

	input := make(chan []byte, 1)
	input <- []byte("uname -a\n")
	var out bytes.Buffer
	s := &session{ws: ws, out: &out, after: regexp.MustCompile(`login: $`), expect: regexp.MustCompile(`Linux guest`)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx, input, 0))
	assert.True(t, s.matched, "output %q", out.String())
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, early, "input reached the guest before its prompt")
	assert.Equal(t, []string{"uname -a\n"}, got)
}

// --after that never matches ends the session at afterBy with nothing sent.
func TestSessionAfterGivesUpAtItsBound(t *testing.T) {
	var out bytes.Buffer
	input := make(chan []byte, 1)
	input <- []byte("never sent\n")
	s := &session{ws: guest(t), out: &out, after: regexp.MustCompile(`never printed`), afterBy: time.Now().Add(200 * time.Millisecond)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx, input, 0))
	assert.False(t, s.afterSeen)
	assert.NotContains(t, out.String(), "echo:", "nothing reached the guest")
	assert.Len(t, input, 1, "the input was not read")
}

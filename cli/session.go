package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/podvirt/podvirt/internal/termsafe"
)

// maxExpectBuffer bounds the output kept to match --expect against.
const maxExpectBuffer = 1 << 20

// session is one console connection: input chunks to the guest, the guest's output to out.
type session struct {
	ws     *websocket.Conn
	out    io.Writer
	expect *regexp.Regexp
	// after, in scripted use, holds the input back until the guest's output matches it; --expect
	// then matches only what the guest prints after that. afterBy ends the session if it has not
	// matched by then (zero: no bound); once it has, the session is not bounded by it.
	after   *regexp.Regexp
	afterBy time.Time
	// queries, in scripted use, takes terminal queries out of the guest's output (queries.go).
	queries *queryStripper

	// Outcome, read after run returns.
	userEnded   bool // the escape key
	inputEnded  bool // stdin ended
	matched     bool // --expect matched
	afterSeen   bool // --after matched (or there was none): the input flows
	closeReason string

	seen bytes.Buffer
	// opened is closed when the input may flow: at once without --after, else once it matches.
	opened chan struct{}
}

// watch takes the guest's output for --after, then for --expect (one buffer, emptied when --after
// matches, bounded by maxExpectBuffer: the older half is dropped); it reports whether --expect matched.
func (s *session) watch(data []byte) bool {
	if !s.afterSeen {
		s.seen.Write(data)
		loc := s.after.FindIndex(s.seen.Bytes())
		if loc == nil {
			s.trim()
			return false
		}
		rest := bytes.Clone(s.seen.Bytes()[loc[1]:])
		s.seen.Reset()
		s.afterSeen = true
		close(s.opened)
		data = rest
	}
	if s.expect == nil {
		return false
	}
	s.seen.Write(data)
	if s.expect.Match(s.seen.Bytes()) {
		return true
	}
	s.trim()
	return false
}

func (s *session) trim() {
	if s.seen.Len() > maxExpectBuffer {
		s.seen.Next(s.seen.Len() - maxExpectBuffer/2)
	}
}

// run pipes until the escape key (when escape is not 0), the input's end, an --expect match, the
// server closing the stream, or ctx's end. Both directions are joined before it returns.
func (s *session) run(ctx context.Context, input <-chan []byte, escape byte) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.opened = make(chan struct{})
	if s.after == nil {
		s.afterSeen = true
		close(s.opened)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the guest's output
		defer wg.Done()
		for {
			_, data, err := s.ws.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					s.closeReason = termsafe.Line(ce.Text)
				} else {
					s.closeReason = "connection lost: " + err.Error()
				}
				if s.queries != nil {
					_, _ = s.out.Write(s.queries.flush())
				}
				cancel(errServerClosed)
				return
			}
			if s.queries != nil {
				data = s.queries.strip(data)
			}
			if _, err := s.out.Write(data); err != nil {
				cancel(err)
				return
			}
			if s.watch(data) {
				s.matched = true
				cancel(errMatched)
				return
			}
		}
	}()
	s.send(ctx, input, escape, cancel)
	_ = s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), noDeadline())
	_ = s.ws.Close()
	wg.Wait()
	// A failure of our own (stdout gone, the guest's stream unwritable) ends the command; the
	// server closing the stream, a match, the escape key or time running out are outcomes.
	cause := context.Cause(ctx)
	switch {
	case cause == nil, errors.Is(cause, errServerClosed), errors.Is(cause, errMatched), errors.Is(cause, errUserEnded),
		errors.Is(cause, context.Canceled), errors.Is(cause, context.DeadlineExceeded), errors.Is(cause, errAfterTimedOut):
		return nil
	}
	return cause
}

var (
	errServerClosed  = errors.New("the server closed the console")
	errMatched       = errors.New("--expect matched")
	errAfterTimedOut = errors.New("--after did not match in time")
)

// send copies input to the guest, once --after has matched, until ctx ends; the escape key and the
// input's end end it too.
func (s *session) send(ctx context.Context, input <-chan []byte, escape byte, cancel context.CancelCauseFunc) {
	var timeUp <-chan time.Time
	if !s.afterBy.IsZero() {
		t := time.NewTimer(time.Until(s.afterBy))
		defer t.Stop()
		timeUp = t.C
	}
	select {
	case <-ctx.Done():
		return
	case <-s.opened:
	case <-timeUp:
		cancel(errAfterTimedOut)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case data, ok := <-input:
			if !ok {
				s.inputEnded = true
				if s.expect == nil {
					return
				}
				<-ctx.Done() // keep reading the output until --expect matches or time runs out
				return
			}
			if escape != 0 {
				if i := bytes.IndexByte(data, escape); i >= 0 {
					data, s.userEnded = data[:i], true
				}
			}
			if len(data) > 0 {
				if err := s.ws.WriteMessage(websocket.BinaryMessage, data); err != nil {
					cancel(errServerClosed) // the stream broke: the reader saw why, or will
					return
				}
			}
			if s.userEnded {
				cancel(errUserEnded)
				return
			}
		}
	}
}

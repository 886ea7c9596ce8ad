package cli

import (
	"bytes"
	"strconv"
)

// maxQueryLength bounds an escape sequence held back while it is read. No terminal query comes
// near it; a longer sequence is dropped whole, to its end, so that no query can hide in one.
const maxQueryLength = 512

// queryStripper removes terminal queries from a guest's output in scripted (not interactive) use:
// device status and attribute requests (ESC[6n, ESC[c, ESC[>q, DECRQM, XTWINOPS reports), colour
// queries (OSC …;? ) and DCS requests (DECRQSS, XTGETTCAP). No terminal answers them there, or the
// wrong one does (the answer lands in the user's shell after the command), and printed raw they are
// noise, such as ash's ESC[6n after each prompt. Every other byte passes unchanged, but for
// sequences longer than maxQueryLength (dropped). A sequence split across frames is held until it
// ends; an ESC inside an unfinished sequence starts a new one, as in a terminal.
type queryStripper struct {
	held []byte // an unfinished escape sequence
	// long is the kind ('[', ']' or 'P') of a sequence past maxQueryLength being dropped to its end.
	long    byte
	longESC bool // the last byte dropped of a long string was ESC (ST is ESC \)
}

// strip returns data without the queries in it; the start of a sequence it cannot yet judge is
// kept for the next call (or flush).
func (q *queryStripper) strip(data []byte) []byte {
	out := make([]byte, 0, len(data)+len(q.held))
	for _, b := range data {
		out = q.feed(out, b)
	}
	return out
}

// feed takes one byte of output and appends what may be passed on to out.
func (q *queryStripper) feed(out []byte, b byte) []byte {
	if q.long != 0 {
		q.dropLong(b)
		return out
	}
	if len(q.held) == 0 {
		if b == 0x1b {
			q.held = append(q.held, b)
			return out
		}
		return append(out, b)
	}
	if b == 0x1b && !isString(q.held) {
		// ESC inside an unfinished control sequence: a terminal abandons it and starts over here.
		out = append(out, q.held...)
		q.held = append(q.held[:0], b)
		return out
	}
	if isString(q.held) && len(q.held) >= 3 && q.held[len(q.held)-1] == 0x1b && b != '\\' {
		// ESC in a string not followed by \ (no ST): the string is abandoned, a new sequence starts.
		out = append(out, q.held[:len(q.held)-1]...)
		q.held = append(q.held[:0], 0x1b)
		return q.feed(out, b)
	}
	q.held = append(q.held, b)
	done, query := sequenceEnd(q.held)
	switch {
	case done && query:
		q.held = q.held[:0]
	case done:
		out = append(out, q.held...)
		q.held = q.held[:0]
	case len(q.held) >= maxQueryLength:
		q.long, q.longESC = q.held[1], q.held[len(q.held)-1] == 0x1b
		q.held = q.held[:0]
	}
	return out
}

// dropLong drops one byte of an over-long sequence and notes where it ends.
func (q *queryStripper) dropLong(b byte) {
	switch {
	case q.long == '[':
		if b >= 0x40 && b <= 0x7e { // the final byte
			q.long = 0
		}
	case b == 0x07 && q.long == ']', b == '\\' && q.longESC: // BEL ends an OSC; ST ends both strings
		q.long = 0
	}
	q.longESC = b == 0x1b
}

// flush returns what is held at the stream's end.
func (q *queryStripper) flush() []byte {
	held := q.held
	q.held = nil
	return held
}

// isString reports whether the held sequence is an OSC or DCS string (ended by BEL or ST only).
func isString(seq []byte) bool {
	return len(seq) >= 2 && (seq[1] == ']' || seq[1] == 'P')
}

// sequenceEnd reports whether seq (starting with ESC) is a whole escape sequence, and whether that
// sequence is a query.
func sequenceEnd(seq []byte) (done, query bool) {
	if len(seq) < 2 {
		return false, false
	}
	switch seq[1] {
	case '[':
		return csiEnd(seq[2:])
	case ']', 'P': // OSC and DCS run to BEL (OSC only) or ST (ESC \)
		last := seq[len(seq)-1]
		if (seq[1] == ']' && last == 0x07) || (last == '\\' && len(seq) > 3 && seq[len(seq)-2] == 0x1b) {
			return true, stringQuery(seq[1], seq[2:])
		}
		return false, false
	case 'Z': // DECID, the old form of ESC[c
		return true, true
	}
	return true, false // a two-byte sequence (ESC 7, ESC =, …)
}

// csiEnd judges a control sequence's body (after ESC [): parameters, intermediates, a final byte.
func csiEnd(body []byte) (done, query bool) {
	if len(body) == 0 {
		return false, false
	}
	final := body[len(body)-1]
	if final < 0x40 || final > 0x7e {
		return false, false
	}
	params := body[:len(body)-1]
	switch final {
	case 'n', 'c': // DSR (ESC[5n, ESC[6n, ESC[?6n), DA1/DA2/DA3 (ESC[c, ESC[>c, ESC[=c)
		return true, true
	case 'p': // DECRQM: ESC[?…$p
		return true, bytes.HasSuffix(params, []byte("$"))
	case 'q': // XTVERSION: ESC[>q, ESC[>0q
		return true, bytes.HasPrefix(params, []byte(">"))
	case 't': // XTWINOPS reports: sizes, positions, titles
		first, _, _ := bytes.Cut(params, []byte(";"))
		n, err := strconv.Atoi(string(first))
		return true, err == nil && (n == 11 || n == 13 || (n >= 14 && n <= 16) || (n >= 18 && n <= 21))
	}
	return true, false
}

// stringQuery reports whether an OSC or DCS body (up to its terminator) asks the terminal
// something: OSC colour queries hold a "?" parameter, DCS requests start "$q" (DECRQSS) or "+q"
// (XTGETTCAP).
func stringQuery(kind byte, body []byte) bool {
	body = bytes.TrimSuffix(bytes.TrimSuffix(body, []byte{0x07}), []byte{0x1b, '\\'})
	if kind == 'P' {
		return bytes.HasPrefix(body, []byte("$q")) || bytes.HasPrefix(body, []byte("+q"))
	}
	return bytes.HasSuffix(body, []byte(";?")) || bytes.Contains(body, []byte(";?;"))
}

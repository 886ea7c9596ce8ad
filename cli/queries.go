package cli

import "bytes"

// maxQueryLength bounds an escape sequence held back while it is read: a longer one is passed on
// as it came (it is no query this filter knows).
const maxQueryLength = 64

// queryStripper removes terminal queries from a guest's output in scripted (not interactive) use:
// device status and attribute requests (ESC[6n, ESC[c, ESC[>q, DECRQM, XTWINOPS reports), colour
// queries (OSC …;? ) and DCS requests (DECRQSS, XTGETTCAP). No terminal answers them there, or the
// wrong one does (the answer lands in the user's shell after the command), and printed raw they are
// noise, such as ash's ESC[6n after each prompt. Every other byte passes unchanged; a sequence split
// across frames is held until it ends.
type queryStripper struct {
	held []byte // an unfinished escape sequence
}

// strip returns data without the queries in it; the start of a sequence it cannot yet judge is
// kept for the next call (or flush).
func (q *queryStripper) strip(data []byte) []byte {
	out := make([]byte, 0, len(data)+len(q.held))
	for _, b := range data {
		if len(q.held) == 0 {
			if b == 0x1b {
				q.held = append(q.held, b)
			} else {
				out = append(out, b)
			}
			continue
		}
		if b == 0x1b && len(q.held) == 1 { // ESC ESC: the first is passed on, the second starts over
			out = append(out, 0x1b)
			continue
		}
		q.held = append(q.held, b)
		done, query := sequenceEnd(q.held)
		switch {
		case done && query:
			q.held = q.held[:0]
		case done || len(q.held) >= maxQueryLength:
			out = append(out, q.held...)
			q.held = q.held[:0]
		}
	}
	return out
}

// flush returns what is held at the stream's end.
func (q *queryStripper) flush() []byte {
	held := q.held
	q.held = nil
	return held
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
		if (seq[1] == ']' && last == 0x07) || (last == '\\' && len(seq) > 2 && seq[len(seq)-2] == 0x1b) {
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
		switch string(first) {
		case "11", "13", "14", "15", "16", "18", "19", "20", "21":
			return true, true
		}
	}
	return true, false
}

// stringQuery reports whether an OSC or DCS body (up to its terminator) asks the terminal
// something: OSC colour queries end in ";?", DCS requests start "$q" (DECRQSS) or "+q" (XTGETTCAP).
func stringQuery(kind byte, body []byte) bool {
	body = bytes.TrimSuffix(bytes.TrimSuffix(body, []byte{0x07}), []byte{0x1b, '\\'})
	if kind == 'P' {
		return bytes.HasPrefix(body, []byte("$q")) || bytes.HasPrefix(body, []byte("+q"))
	}
	return bytes.HasSuffix(body, []byte(";?"))
}

package v1

import (
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds of a launcher's report. A launcher runs in the tenant's Pod (the tenant can exec into it),
// so the node agent passes nothing of a report on to the API before Bounded made it safe: a
// condition's reason must match the API's pattern, a message must fit, a list must be short.
const (
	// MaxReasonLength bounds a reason (CamelCase, as the API's condition reasons).
	MaxReasonLength = 64
	// MaxMessageLength bounds a message, in bytes.
	MaxMessageLength = 1024
	// MaxInterfaces bounds the NICs a report may list.
	MaxInterfaces = 32
	// MaxIPsPerInterface bounds the addresses of one NIC.
	MaxIPsPerInterface = 8
	// ReasonUnknown replaces a reason that is not CamelCase.
	ReasonUnknown = "Unknown"
)

// maxGuestOSField bounds each field of what the guest agent says of the guest's OS.
const maxGuestOSField = 256

// Bounded returns s made safe to pass on: a reason that is not CamelCase of at most
// MaxReasonLength becomes ReasonUnknown; messages are cut to MaxMessageLength bytes of valid UTF-8
// without control characters (the access credentials' message too; the guest's OS fields cut to
// maxGuestOSField); at most MaxInterfaces NICs, those named by a DNS label, each with at
// most MaxIPsPerInterface short addresses and a short MAC; a migration's times in UTC between
// the years 1970 and 9999, else none.
func (s Status) Bounded() Status {
	s.Reason = BoundedReason(s.Reason)
	s.Message = BoundedMessage(s.Message)
	if len(s.Interfaces) > 0 {
		nics := make([]Interface, 0, min(len(s.Interfaces), MaxInterfaces))
		for _, i := range s.Interfaces {
			if len(nics) == MaxInterfaces {
				break
			}
			if !isDNSLabel(i.Name) {
				continue
			}
			i.MAC = shortWord(i.MAC, 64)
			i.IPs, i.GuestIPs = boundedIPs(i.IPs), guestIPs(i.GuestIPs)
			i.GuestName = guestWord(i.GuestName)
			nics = append(nics, i)
		}
		s.Interfaces = nics
	}
	if c := s.AccessCredentials; c != nil {
		s.AccessCredentials = &CredentialSync{Synchronized: c.Synchronized, Message: BoundedMessage(c.Message)}
	}
	if o := s.GuestOSInfo; o != nil { // what the guest says of itself: short lines
		b := *o
		for _, f := range []*string{&b.Name, &b.KernelRelease, &b.Version, &b.PrettyName, &b.VersionID, &b.KernelVersion, &b.Machine, &b.ID} {
			*f = BoundedMessage(*f)
			if len(*f) > maxGuestOSField {
				*f = BoundedMessage((*f)[:maxGuestOSField])
			}
		}
		s.GuestOSInfo = &b
	}
	if m := s.Migration; m != nil {
		c := *m
		c.UID = shortWord(c.UID, 128)
		c.Message = BoundedMessage(c.Message)
		c.StartTime = boundedTime(c.StartTime)
		if c.EndTime != nil {
			if t := boundedTime(*c.EndTime); t.IsZero() {
				c.EndTime = nil
			} else {
				c.EndTime = &t
			}
		}
		s.Migration = &c
	}
	return s
}

// boundedIPs are at most MaxIPsPerInterface of ips, each a short word.
func boundedIPs(ips []string) []string {
	out := make([]string, 0, min(len(ips), MaxIPsPerInterface))
	for _, ip := range ips {
		if ip = shortWord(ip, 64); ip != "" && len(out) < MaxIPsPerInterface {
			out = append(out, ip)
		}
	}
	return out
}

// guestIPs are at most MaxIPsPerInterface of ips that parse as addresses without a zone, in their
// normal form (the guest, and the launcher, are the tenant's: nothing else reaches the status).
func guestIPs(ips []string) []string {
	var out []string
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Zone() == "" && len(out) < MaxIPsPerInterface {
			out = append(out, ip.String())
		}
	}
	return out
}

// guestWord is a name as a guest gives it ("Ethernet 2" on Windows): printable UTF-8 of at most 64
// bytes, else "".
func guestWord(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return ""
	}
	return s
}

// boundedTime is t in UTC when its year is 1970 to 9999 (the API's date-time format takes no other),
// else the zero time (no time reported).
func boundedTime(t time.Time) time.Time {
	if u := t.UTC(); u.Year() >= 1970 && u.Year() <= 9999 {
		return u
	}
	return time.Time{}
}

// BoundedReason is r when it is CamelCase ([A-Za-z][A-Za-z0-9]*) of at most MaxReasonLength, else
// ReasonUnknown.
func BoundedReason(r string) string {
	if r == "" {
		return ""
	}
	if len(r) > MaxReasonLength {
		return ReasonUnknown
	}
	for i, c := range r {
		letter := c < utf8.RuneSelf && unicode.IsLetter(c)
		if !letter && (i == 0 || c >= utf8.RuneSelf || !unicode.IsDigit(c)) {
			return ReasonUnknown
		}
	}
	return r
}

// BoundedMessage is m as valid UTF-8 without control characters (a newline or tab becomes a space),
// cut to at most MaxMessageLength bytes on a character boundary.
func BoundedMessage(m string) string {
	m = strings.ToValidUTF8(m, "\uFFFD")
	var b strings.Builder
	for _, c := range m {
		if unicode.IsControl(c) {
			c = ' '
		}
		if b.Len()+utf8.RuneLen(c) > MaxMessageLength {
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// shortWord is s when it is at most n printable ASCII characters without spaces, else "".
func shortWord(s string, n int) string {
	if len(s) > n {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return ""
		}
	}
	return s
}

// isDNSLabel: lower-case alphanumerics and '-', starting and ending alphanumeric, at most 63.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

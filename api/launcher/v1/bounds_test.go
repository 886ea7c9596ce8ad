package v1

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// conditionReason is the API's pattern of a condition's reason (metav1.Condition).
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

func TestBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	st := Status{Reason: "../../etc", Message: "line1\nline2\x00" + long,
		Interfaces: []Interface{{Name: "default", MAC: "52:54:00:00:00:01", IPs: []string{"10.0.0.2", "bad ip"}}, {Name: "../x"}, {Name: "Upper"}},
		Migration:  &MigrationStatus{Message: long}}
	b := st.Bounded()
	if b.Reason != ReasonUnknown {
		t.Errorf("reason %q", b.Reason)
	}
	if len(b.Message) > MaxMessageLength || strings.ContainsAny(b.Message, "\n\x00") || !strings.HasPrefix(b.Message, "line1 line2 ") {
		t.Errorf("message %q", b.Message)
	}
	if len(b.Interfaces) != 1 || !reflect.DeepEqual(b.Interfaces[0].IPs, []string{"10.0.0.2"}) {
		t.Errorf("interfaces %+v", b.Interfaces)
	}
	if len(b.Migration.Message) > MaxMessageLength || len(st.Migration.Message) != len(long) {
		t.Error("the migration's message is bounded in a copy")
	}
	if got := (Status{Reason: ReasonGuestShutdown}).Bounded().Reason; got != ReasonGuestShutdown {
		t.Errorf("a launcher reason was changed: %q", got)
	}
}

// FuzzBounded: whatever a launcher answers, its bounded status has reasons the API accepts, messages
// that fit, few NICs named by DNS labels, and bounding twice changes nothing.
func FuzzBounded(f *testing.F) {
	for _, s := range []string{
		`{"state":"Running","reason":"Started","interfaces":[{"name":"default","mac":"52:54:00:12:34:56","ips":["10.0.2.15"]}]}`,
		`{"state":"Shutoff","reason":"GuestShutdown","message":"the guest powered off"}`,
		`{"state":"Running","migration":{"role":"Source","phase":"Failed","message":"boom","startTime":"2026-01-01T00:00:00Z"}}`,
		`{"state":"Running","migration":{"role":"Source","phase":"Running","startTime":"9999-12-31T23:00:00-23:00","endTime":"0001-01-01T00:00:00+01:00"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var st Status
		if json.Unmarshal(data, &st) != nil {
			return
		}
		b := st.Bounded()
		if b.Reason != "" && (len(b.Reason) > MaxReasonLength || !conditionReason.MatchString(b.Reason)) {
			t.Fatalf("reason %q", b.Reason)
		}
		for _, m := range []string{b.Message, migrationMessage(b)} {
			if len(m) > MaxMessageLength || !utf8.ValidString(m) || strings.IndexFunc(m, unicode.IsControl) >= 0 {
				t.Fatalf("message %q", m)
			}
		}
		if len(b.Interfaces) > MaxInterfaces {
			t.Fatalf("%d interfaces", len(b.Interfaces))
		}
		for _, i := range b.Interfaces {
			if !isDNSLabel(i.Name) || len(i.IPs) > MaxIPsPerInterface {
				t.Fatalf("interface %+v", i)
			}
		}
		if m := b.Migration; m != nil {
			for _, tm := range []time.Time{m.StartTime, ptrTime(m.EndTime)} {
				if !tm.IsZero() && (tm.Year() < 1970 || tm.Year() > 9999 || tm.Location() != time.UTC) {
					t.Fatalf("time %v", tm)
				}
			}
		}
		if again := b.Bounded(); !reflect.DeepEqual(again, b) {
			t.Fatalf("bounding twice changed %+v into %+v", b, again)
		}
	})
}

func ptrTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func migrationMessage(s Status) string {
	if s.Migration == nil {
		return ""
	}
	return s.Migration.Message
}

// What a launcher says of the guest's OS and of its credentials reaches the API short and printable.
func TestBoundedGuestTexts(t *testing.T) {
	long := strings.Repeat("x", 2*MaxMessageLength)
	s := Status{
		AccessCredentials: &CredentialSync{Message: "\x1b]0;owned\x07" + long},
		GuestOSInfo:       &virtv1.VirtualMachineInstanceGuestOSInfo{PrettyName: "Debian\x1b[2J" + long, ID: "debian"},
	}.Bounded()
	if m := s.AccessCredentials.Message; len(m) > MaxMessageLength || strings.ContainsAny(m, "\x1b\x07") {
		t.Errorf("credentials message: %d bytes, escapes kept: %q", len(m), m[:20])
	}
	if p := s.GuestOSInfo.PrettyName; len(p) > maxGuestOSField || strings.Contains(p, "\x1b") {
		t.Errorf("pretty name: %d bytes, %q", len(p), p[:20])
	}
	if s.GuestOSInfo.ID != "debian" {
		t.Errorf("id = %q", s.GuestOSInfo.ID)
	}

	nics := Status{Interfaces: []Interface{
		{Name: "default", GuestName: "Ethernet 2", GuestIPs: []string{"10.0.0.5", "evil", "fe80::1%eth0", "2001:DB8::1"}},
		{Name: "blue", GuestName: "eth1\x1b[2J"},
	}}.Bounded().Interfaces
	if nics[0].GuestName != "Ethernet 2" || len(nics[0].GuestIPs) != 2 || nics[0].GuestIPs[0] != "10.0.0.5" || nics[0].GuestIPs[1] != "2001:db8::1" {
		t.Errorf("guest side of a NIC: %q %q, want the Windows name and the two addresses that parse, normalised", nics[0].GuestName, nics[0].GuestIPs)
	}
	if nics[1].GuestName != "" {
		t.Errorf("a guest NIC name with an escape: %q, want none", nics[1].GuestName)
	}
}

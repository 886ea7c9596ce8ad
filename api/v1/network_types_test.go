package v1

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMultusAttachment(t *testing.T) {
	for _, tc := range []struct {
		networkName, ns, name string
		ok                    bool
	}{
		{"blue", "vms", "blue", true},
		{"shared/blue", "shared", "blue", true},
		{"", "vms", "", false},
		{"a/b/c", "a", "b/c", false},
		{"/blue", "", "blue", false},
		{"shared/", "shared", "", false},
	} {
		ns, name, ok := (&MultusNetwork{NetworkName: tc.networkName}).Attachment("vms")
		assert.Equal(t, []any{tc.ns, tc.name, tc.ok}, []any{ns, name, ok}, tc.networkName)
	}
}

// vmNetworkCIDR keeps KubeVirt's reading of leading zeros (decimal) and leaves room for a gateway.
func TestGuestCIDRs(t *testing.T) {
	for _, tc := range []struct {
		v4, v6         string
		wantV4, wantV6 string
		err            string
	}{
		{v4: "10.10.010.0/24", wantV4: "10.10.10.0/24"},
		{v4: "010.000.2.00/24", wantV4: "10.0.2.0/24"},
		{v4: "10.0.0256.0/24", err: "is not an IPv4 CIDR"},
		{v4: "10.0..0/24", err: "is not an IPv4 CIDR"},
		{v4: "::ffff:10.0.0.0/120", err: "is not an IPv4 CIDR"},
		{v4: strings.Repeat("0", 70) + "10.0.0.0/24", err: "longer than 64 characters"},
		{v4: "10.0.2.7/24", v6: "fd10:0:2::/120", wantV4: "10.0.2.0/24", wantV6: "fd10:0:2::/120"},
		{},
		{v4: "10.0.0.0", err: "vmNetworkCIDR: \"10.0.0.0\" is not an IPv4 CIDR"},
		{v4: "fd00::/64", err: "is not an IPv4 CIDR"},
		{v6: "10.0.0.0/8", err: "vmIPv6NetworkCIDR: \"10.0.0.0/8\" is not an IPv6 CIDR"},
		{v4: "10.0.0.0/31", err: "prefix at most /30"},
		{v6: "fd00::/127", err: "prefix at most /126"},
	} {
		v4, v6, err := (&PodNetwork{VMNetworkCIDR: tc.v4, VMIPv6NetworkCIDR: tc.v6}).GuestCIDRs()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want %q", tc, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		str := func(n *net.IPNet) string {
			if n == nil {
				return ""
			}
			return n.String()
		}
		if str(v4) != tc.wantV4 || str(v6) != tc.wantV6 {
			t.Errorf("%+v: got %s %s", tc, str(v4), str(v6))
		}
	}
}

package v1

import (
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

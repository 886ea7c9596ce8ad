package launcher

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"libvirt.org/go/libvirt"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// What the guest says is bounded and cleaned before it leaves the launcher; an agent that does not
// answer is unavailable (503), one that refuses a conflict (409) with its own words.
func TestAgentErrorsAndBounds(t *testing.T) {
	refused := agentError("guest-exec", libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR,
		Message: "internal error: unable to execute QEMU agent command 'guest-exec': Guest agent command failed, error was 'Failed to execute child process \x1b[2J“x”\r\n'"})
	assert.ErrorIs(t, refused, errConflict)
	assert.EqualError(t, refused, "guest agent guest-exec: Failed to execute child process ?[2J“x”?")

	silent := agentError("guest info", libvirt.Error{Code: libvirt.ERR_AGENT_UNRESPONSIVE, Message: "Guest agent is not responding"})
	assert.ErrorIs(t, silent, errAgentUnavailable)
	assert.NotErrorIs(t, silent, errConflict)

	plain := agentError("thaw", errors.New(strings.Repeat("x", 5000)))
	assert.Len(t, plain.Error(), len("guest agent thaw: ")+maxGuestString)

	many := make([]libvirt.DomainGuestInfoFileSystem, maxGuestItems+10)
	for i := range many {
		many[i] = libvirt.DomainGuestInfoFileSystem{MountPoint: strings.Repeat("/m", 1000), TotalBytes: 1 << 63,
			Disks: []libvirt.DomainGuestInfoFileSystemDisk{{Device: "/dev/vda"}, {Device: "/dev/sdb"}, {Device: "/dev/nvme0n1"}}}
	}
	fs := fileSystems(many)
	assert.Len(t, fs, maxGuestItems)
	assert.Len(t, fs[0].MountPoint, maxGuestString)
	assert.Equal(t, 1<<62, fs[0].TotalBytes, "sizes fit an int")
	assert.Equal(t, []string{"virtio", "scsi", ""}, []string{fs[0].Disk[0].BusType, fs[0].Disk[1].BusType, fs[0].Disk[2].BusType})

	out, cutOff := cut(make([]byte, subv1.MaxExecOutputBytes+1), false)
	assert.Len(t, out, subv1.MaxExecOutputBytes)
	assert.True(t, cutOff)
	_, cutOff = cut([]byte("short"), true)
	assert.True(t, cutOff, "the agent's own truncation is kept")
}

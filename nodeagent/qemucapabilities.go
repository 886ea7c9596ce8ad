package nodeagent

import (
	"sync"

	"github.com/podvirt/podvirt/nodeagent/launcher/qemucaps"
)

// QemuCapabilities is libvirt's cache of qemu's capabilities as the node agent's Pod probed them on
// this node with the launcher image (a container beside the agent writes them into Dir, see package
// qemucaps). They are read once they are there, and sent with the syncs of emulated guests (the
// probe runs without KVM, so libvirt would drop them for a KVM guest).
type QemuCapabilities struct {
	// Dir holds the cache files; empty: none, every launcher probes qemu itself.
	Dir string

	mu    sync.Mutex
	files map[string][]byte
}

// Files are the cache files, nil until the probe has left them (or without a Dir).
func (q *QemuCapabilities) Files() map[string][]byte {
	if q == nil || q.Dir == "" {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.files == nil {
		if files, err := qemucaps.Read(q.Dir); err == nil && len(files) > 0 {
			q.files = files
		}
	}
	return q.files
}

package v1

import (
	"crypto/sha256"
	"encoding/hex"
)

// Names of a secondary (Multus) network's devices in the launcher Pod's network namespace. The
// controller asks Multus for the Pod interface by name, the node agent bridges it to a tap device it
// creates for the launcher's user, and the launcher's guest NIC opens that tap. Each name is a fixed
// prefix and the first 11 hex digits of the network's SHA-256, so it fits the kernel's 15 characters
// and the same network always gets the same names (KubeVirt names its Pod interfaces the same way).
type SecondaryNetwork struct {
	// PodInterface is the interface Multus attaches to the Pod ("pod<hash>").
	PodInterface string
	// Bridge joins PodInterface and Tap ("k6t-<hash>").
	Bridge string
	// Tap is the guest NIC's tap device ("tap<hash>"), owned by the launcher's user.
	Tap string
}

// SecondaryNetworkDevices names the devices of the spec network called network (spec.networks[].name).
func SecondaryNetworkDevices(network string) SecondaryNetwork {
	sum := sha256.Sum256([]byte(network))
	h := hex.EncodeToString(sum[:])[:11]
	return SecondaryNetwork{PodInterface: "pod" + h, Bridge: "k6t-" + h, Tap: "tap" + h}
}

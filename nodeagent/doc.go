// Package nodeagent is the node agent (virt-handler's role): on each node it owns the runtime of the
// VirtualMachineInstances scheduled there. From phase Scheduled on it finds the instance's launcher
// through the kubelet's emptyDir path, hands it the instance (sync), follows the guest's state and
// writes what it observes: phase Running, Succeeded or Failed with a reason, the Ready, Paused,
// SoftwareEmulation and Synchronized conditions, the interfaces and the phase transition times. It
// asks the launcher for an ACPI shutdown (with the instance's grace period) when the instance is
// deleted, serves the pause and unpause subresources for the aggregated API server, and renews a
// heartbeat Lease (see api/heartbeat/v1) so the controllers notice when a node goes silent.
//
// The agent is level-based: every pass derives the status from what the launcher and the Pod show
// now, so an agent that restarts re-adopts running guests by reconnecting, without disturbing them.
package nodeagent

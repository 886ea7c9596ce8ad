// Package vm is the VirtualMachine controller: it keeps a VirtualMachineInstance in existence (or
// not) according to the VirtualMachine's run strategy and pending start/stop requests, applies the
// crash-loop backoff, adopts orphaned instances, and reports the VirtualMachine's status.
//
// The decisions are pure functions of what one reconcile observes (decide.go, status.go), tested
// with tables; controller.go only fetches, acts and writes status once.
package vm

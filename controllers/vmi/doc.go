// Package vmi is the VirtualMachineInstance controller: it renders and creates the launcher Pod
// of each instance, moves the instance Pending → Scheduling → Scheduled as the Pod is scheduled and
// starts, fails the instance when its Pod fails or vanishes, and deletes the Pod when the instance
// is deleted. From Scheduled on the node agent drives the guest and reports Running and beyond.
package vmi

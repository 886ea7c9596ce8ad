//go:build bench

// Package bench measures Podvirt's node side on a real cluster (the local one by default, see
// tests/framework): VMI create → Running against a plain Pod's create → Running, the time to the
// guest's first console line, and each launcher Pod's memory split into guest RAM, the emulator's
// translation cache and the fixed per-VM overhead. It prints figures and asserts nothing about
// them: it fails only on errors (an instance that never runs, a cgroup that cannot be read).
//
// The files carry the build tag bench, so `go test ./...` and `make e2e` skip them. Run with
// `make bench-vms` (under the heavy lock, so other builds do not distort the figures).
package bench

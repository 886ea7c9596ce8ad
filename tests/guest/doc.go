// Package guest boots the Podvirt demo guest images (built by hack/guest/build.sh, `make guest-images`)
// under qemu with software emulation, directly on the host, and checks what the VM tests rely on:
// the boot banner on the serial console, the NoCloud user-data run, DHCP and the web page on port 80,
// a shell on ttyS0 that can format and write a second disk, and a clean ACPI power-off.
//
// The tests carry the build tag guestboot (they take minutes under TCG): run them with
// `make guest-test` or `go test -tags guestboot ./tests/guest/`.
package guest

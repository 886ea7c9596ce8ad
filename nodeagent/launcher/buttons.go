package launcher

import (
	"errors"
	"fmt"
	"strings"

	"libvirt.org/go/libvirt"
)

// reboot presses the ACPI power button for a reboot (a guest with an agent is asked through it
// first: rebootThroughAgent): libvirt lets the guest power off, then resets and resumes it, so the
// domain (and this launcher) keeps running. A paused guest cannot see the button, so it is refused.
func (g *guest) reboot() error {
	return g.press("rebooted", func() error {
		if err := g.dom.Reboot(libvirt.DOMAIN_REBOOT_ACPI_POWER_BTN); err != nil {
			return fmt.Errorf("acpi reboot: %w", err)
		}
		return nil
	})
}

// reset presses the reset button: the guest restarts at once, without shutting down, and the domain
// (and this launcher) keeps running.
func (g *guest) reset() error {
	return g.press("reset", func() error {
		if err := g.dom.Reset(0); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		g.notFrozen() // a reset guest starts thawed
		return nil
	})
}

// press runs button (a reboot or reset; done names it) only for a guest that runs and neither shuts
// down nor migrates: during a migration libvirt would hold the request until the migration's job
// ends, and this loop with it.
func (g *guest) press(done string, button func() error) error {
	state, _, err := g.dom.GetState()
	if err != nil {
		return fmt.Errorf("domain state: %w", err)
	}
	switch {
	case state != libvirt.DOMAIN_RUNNING && state != libvirt.DOMAIN_BLOCKED:
		return fmt.Errorf("the guest is %s, not running: it cannot be %s", strings.ToLower(string(stateOf(state))), done)
	case g.shutdownReq:
		return errors.New("the guest is shutting down")
	case g.migrating:
		return fmt.Errorf("the guest is migrating: it cannot be %s until the migration ends", done)
	case g.target != nil:
		return fmt.Errorf("the guest is arriving by migration: it cannot be %s until the migration ends", done)
	}
	return button()
}

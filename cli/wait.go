package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// pollInterval is how often a wait reads the VM and its instance.
const pollInterval = 250 * time.Millisecond

// waiter follows a VM and its instance until they reach a state, printing a line whenever what a
// user sees changes: the VM's printableStatus, the instance's phase, and why it is blocked (the
// reasons the controllers and the node agent recorded in conditions).
type waiter struct {
	c       *clients
	name    string
	out     io.Writer
	timeout time.Duration
	last    string
}

// progress is one observation, as a line.
func progress(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) string {
	parts := []string{"vm/" + vm.Name + " " + string(vm.Status.PrintableStatus)}
	if vmi != nil {
		phase := vmi.Status.Phase
		if phase == "" {
			phase = virtv1.Pending // created, not yet seen by the controllers
		}
		parts = append(parts, "instance "+string(phase))
		for _, t := range []string{virtv1.VirtualMachineInstancePodScheduled, virtv1.VirtualMachineInstanceReady} {
			if c := meta.FindStatusCondition(vmi.Status.Conditions, t); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" && vmi.Status.Phase != virtv1.Running {
				parts = append(parts, c.Reason+": "+c.Message)
				break // the first blocker is the one that matters (not scheduled, so not ready either)
			}
		}
	}
	if c := meta.FindStatusCondition(vm.Status.Conditions, virtv1.VirtualMachineFailure); c != nil && c.Status == metav1.ConditionTrue {
		parts = append(parts, c.Reason+": "+c.Message)
	}
	return strings.Join(parts, ", ")
}

// observe reads the VM and its instance (nil when there is none) and prints a changed line.
func (w *waiter) observe(ctx context.Context) (*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance, error) {
	key := client.ObjectKey{Namespace: w.c.namespace, Name: w.name}
	vm := &virtv1.VirtualMachine{}
	if err := w.c.client.Get(ctx, key, vm); err != nil {
		return nil, nil, err
	}
	vmi := &virtv1.VirtualMachineInstance{}
	switch err := w.c.client.Get(ctx, key, vmi); {
	case apierrors.IsNotFound(err):
		vmi = nil
	case err != nil:
		return nil, nil, err
	}
	if line := progress(vm, vmi); line != w.last {
		w.last = line
		fmt.Fprintln(w.out, line)
	}
	return vm, vmi, nil
}

// until polls done until it holds; running out of time is a timeout error saying what it waited
// for and the last state seen.
func (w *waiter) until(ctx context.Context, what string, done func(*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) bool) error {
	pollCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	// The requests run under ctx, not the poll's deadline, so time running out ends the loop
	// between requests instead of failing one.
	err := wait.PollUntilContextCancel(pollCtx, pollInterval, true, func(context.Context) (bool, error) {
		vm, vmi, err := w.observe(ctx)
		if err != nil {
			return false, err
		}
		return done(vm, vmi), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return timeout(fmt.Errorf("timed out after %s waiting for vm/%s to be %s (last seen: %s)", w.timeout, w.name, what, w.last))
	}
	return err
}

// running waits for an instance other than notUID ("" for any) to run.
func (w *waiter) running(ctx context.Context, notUID string) error {
	return w.until(ctx, "Running", func(_ *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) bool {
		return vmi != nil && string(vmi.UID) != notUID && vmi.Status.Phase == virtv1.Running
	})
}

// stopped waits for the instance to be gone and the VM to say Stopped.
func (w *waiter) stopped(ctx context.Context) error {
	return w.until(ctx, "Stopped", func(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) bool {
		return vmi == nil && vm.Status.PrintableStatus == virtv1.VirtualMachineStatusStopped
	})
}

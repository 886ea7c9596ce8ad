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
	tty     bool // out is a terminal: a spinner shows the wait goes on

	last  string
	frame int
	kind  string // what is waited for, when not the VM (a migration)
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

// spinner is drawn at the end of the output while a wait on a terminal sees no change.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// report prints line when it changed; on a terminal a spinner line shows that the wait goes on.
func (w *waiter) report(line string) {
	if w.tty {
		fmt.Fprint(w.out, "\r\033[K") // the spinner line goes
	}
	if line != w.last {
		w.last = line
		fmt.Fprintln(w.out, line)
	}
	if w.tty {
		w.frame++
		fmt.Fprintf(w.out, "%s waiting", spinner[w.frame%len(spinner)])
	}
}

// observeVM reads the VM and its instance (nil when there is none).
func (w *waiter) observeVM(ctx context.Context) (*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance, error) {
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
	return vm, vmi, nil
}

// until polls observe (which returns the progress line and whether the wait is over) until done;
// running out of time is a timeout error saying what it waited for and the last state seen.
func (w *waiter) until(ctx context.Context, what string, observe func(context.Context) (string, bool, error)) error {
	pollCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if w.tty {
		defer fmt.Fprint(w.out, "\r\033[K")
	}
	// The requests run under ctx, not the poll's deadline, so time running out ends the loop
	// between requests instead of failing one.
	err := wait.PollUntilContextCancel(pollCtx, pollInterval, true, func(context.Context) (bool, error) {
		line, done, err := observe(ctx)
		if err != nil {
			return false, err
		}
		w.report(line)
		return done, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return timeout(fmt.Errorf("timed out after %s waiting for %s to be %s (last seen: %s)", w.timeout, w.what(), what, w.last))
	}
	return err
}

func (w *waiter) what() string {
	if w.kind != "" {
		return w.kind
	}
	return "vm/" + w.name
}

// vmState is an observe function for until: done tells when the VM and its instance are there.
func (w *waiter) vmState(done func(*virtv1.VirtualMachine, *virtv1.VirtualMachineInstance) bool) func(context.Context) (string, bool, error) {
	return func(ctx context.Context) (string, bool, error) {
		vm, vmi, err := w.observeVM(ctx)
		if err != nil {
			return "", false, err
		}
		return progress(vm, vmi), done(vm, vmi), nil
	}
}

// running waits for an instance other than notUID ("" for any) to run, and for its condition too
// when one is given (Ready, AgentConnected: the progress line then says why it is not there yet).
func (w *waiter) running(ctx context.Context, notUID string, condition string) error {
	what := "Running"
	if condition != "" {
		what = condition
	}
	return w.until(ctx, what, func(ctx context.Context) (string, bool, error) {
		vm, vmi, err := w.observeVM(ctx)
		if err != nil {
			return "", false, err
		}
		line := progress(vm, vmi)
		switch {
		case vmi == nil || string(vmi.UID) == notUID || vmi.Status.Phase != virtv1.Running:
			return line, false, nil
		case condition == "":
			return line, true, nil
		}
		c := meta.FindStatusCondition(vmi.Status.Conditions, condition)
		not := "not ready"
		if condition == virtv1.VirtualMachineInstanceAgentConnected {
			not = "guest agent not connected"
		}
		switch {
		case c != nil && c.Status == metav1.ConditionTrue:
			return line + ", " + condition, true, nil
		case c != nil && c.Message != "":
			return line + ", " + not + ": " + c.Reason + ": " + c.Message, false, nil
		case c != nil:
			return line + ", " + not + ": " + c.Reason, false, nil
		}
		return line + ", " + not, false, nil
	})
}

// stopped waits for the instance to be gone and the VM to say Stopped.
func (w *waiter) stopped(ctx context.Context) error {
	return w.until(ctx, "Stopped", w.vmState(func(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) bool {
		return vmi == nil && vm.Status.PrintableStatus == virtv1.VirtualMachineStatusStopped
	}))
}

// migrated waits for the newest migration of the instance created at or after since to end
// (Succeeded, or Failed: an error), printing its phases.
func (w *waiter) migrated(ctx context.Context, since metav1.Time) error {
	var failed string
	err := w.until(ctx, "Succeeded", func(ctx context.Context) (string, bool, error) {
		list := &virtv1.VirtualMachineInstanceMigrationList{}
		if err := w.c.client.List(ctx, list, client.InNamespace(w.c.namespace)); err != nil {
			return "", false, err
		}
		var newest *virtv1.VirtualMachineInstanceMigration
		for i := range list.Items {
			m := &list.Items[i]
			if m.Spec.VMIName == w.name && !m.CreationTimestamp.Before(&since) && (newest == nil || newest.CreationTimestamp.Before(&m.CreationTimestamp)) {
				newest = m
			}
		}
		if newest == nil {
			return "migration of vmi/" + w.name + " not seen yet", false, nil
		}
		w.kind = "migration " + newest.Name
		phase := newest.Status.Phase
		if phase == "" {
			phase = virtv1.MigrationPending
		}
		if phase == virtv1.MigrationFailed {
			failed = newest.Name
		}
		return "migration " + newest.Name + " " + string(phase), phase.IsFinal(), nil
	})
	if err == nil && failed != "" {
		return fmt.Errorf("migration %s of vmi/%s failed: see kubectl describe vmim %s", failed, w.name, failed)
	}
	return err
}

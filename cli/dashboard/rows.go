// Package dashboard is `virtctl dashboard`: a terminal UI (Bubble Tea v2) listing VMs live, with
// a detail view and the lifecycle actions. The Model is pure (Model/Update/View, no I/O in
// Update): rows arrive as messages from the watch-fed Source, actions run as commands through
// Actions, and the console is handed the terminal with tea.ExecProcess.
package dashboard

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Row is one VM as the list shows it.
type Row struct {
	Namespace, Name string
	Status          string // the VM's printableStatus
	Ready           bool
	Node, IP        string
	Created         time.Time
	// Phase is the instance's phase ("" without one).
	Phase string
	// Why says, in plain words, what blocks the VM (empty when nothing does).
	Why string
	// Running reports whether the VM is meant to run (its run strategy or spec.running).
	Running bool
}

// Key is namespace/name.
func (r Row) Key() string { return r.Namespace + "/" + r.Name }

// Rows joins VMs with their instances (same namespace and name), sorted by namespace and name.
func Rows(vms []virtv1.VirtualMachine, vmis []virtv1.VirtualMachineInstance) []Row {
	byKey := map[string]*virtv1.VirtualMachineInstance{}
	for i := range vmis {
		byKey[vmis[i].Namespace+"/"+vmis[i].Name] = &vmis[i]
	}
	rows := make([]Row, 0, len(vms))
	for i := range vms {
		vm := &vms[i]
		r := Row{Namespace: vm.Namespace, Name: vm.Name, Status: string(vm.Status.PrintableStatus), Created: vm.CreationTimestamp.Time,
			Running: vm.Spec.EffectiveRunStrategy() != virtv1.RunStrategyHalted}
		if r.Status == "" {
			r.Status = "Unknown"
		}
		r.Ready = meta.IsStatusConditionTrue(vm.Status.Conditions, virtv1.VirtualMachineReady)
		if vmi := byKey[r.Key()]; vmi != nil {
			r.Node, r.Phase = vmi.Status.NodeName, string(vmi.Status.Phase)
			if len(vmi.Status.Interfaces) > 0 {
				r.IP = vmi.Status.Interfaces[0].IP
			}
			r.Why = why(vm, vmi)
		} else {
			r.Why = why(vm, nil)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key() < rows[j].Key() })
	return rows
}

// why is the plain-language reason a VM does not run as asked, from the conditions the
// controllers and the node agent record.
func why(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance) string {
	if c := meta.FindStatusCondition(vm.Status.Conditions, virtv1.VirtualMachineFailure); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason + ": " + c.Message
	}
	if vmi == nil || vmi.Status.Phase == virtv1.Running {
		return ""
	}
	for _, t := range []string{virtv1.VirtualMachineInstancePodScheduled, virtv1.VirtualMachineInstanceReady} {
		if c := meta.FindStatusCondition(vmi.Status.Conditions, t); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// age is a kubectl-style age (5s, 3m, 2h, 4d).
func age(created, now time.Time) string {
	if created.IsZero() {
		return "-"
	}
	d := now.Sub(created)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// matches reports whether the row contains the filter (case-insensitive) in its name, namespace,
// status or node.
func (r Row) matches(filter string) bool {
	if filter == "" {
		return true
	}
	f := strings.ToLower(filter)
	for _, s := range []string{r.Name, r.Namespace, r.Status, r.Node} {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

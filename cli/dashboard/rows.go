// Package dashboard is `virtctl dashboard`: a terminal UI (Bubble Tea v2) listing VMs, instances
// and instance replica sets live, with a detail view and the lifecycle actions. The Model is pure
// (Model/Update/View, no I/O in Update): snapshots and events arrive as messages from the
// watch-fed Source, actions run as commands through Actions, and the console is handed the
// terminal with tea.ExecProcess.
package dashboard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Kind is what a list shows.
type Kind int

// The kinds the dashboard lists (`:vm`, `:vmi`, `:vmirs`).
const (
	KindVM Kind = iota
	KindVMI
	KindVMIRS
)

// String is the kind's plural as the header shows it.
func (k Kind) String() string {
	return [...]string{"VMs", "VMIs", "VMIRSs"}[k]
}

// Singular is the kind's name for one object (VM, VMI, VMIRS).
func (k Kind) Singular() string { return strings.TrimSuffix(k.String(), "s") }

// Row is one object as the list shows it.
type Row struct {
	Kind            Kind
	Namespace, Name string
	// Status is the VM's printableStatus, the instance's phase (Paused when paused) or, for a
	// replica set, "ready/desired".
	Status   string
	Ready    bool
	Node, IP string
	Created  time.Time
	// Phase is the instance's phase ("" without one).
	Phase string
	// Running reports whether a VM runs or is kept running (what s stops); false: s starts it. Its
	// run strategy is Always, or it has a live instance it is not being stopped from.
	Running bool

	// The objects the row shows, for the detail view (never modified).
	vm  *virtv1.VirtualMachine
	vmi *virtv1.VirtualMachineInstance
	rs  *virtv1.VirtualMachineInstanceReplicaSet
}

// Key is namespace/name.
func (r Row) Key() string { return r.Namespace + "/" + r.Name }

// paused reports whether the row's instance is paused.
func (r Row) paused() bool {
	return r.vmi != nil && meta.IsStatusConditionTrue(r.vmi.Status.Conditions, virtv1.VirtualMachineInstancePaused)
}

// Rows joins VMs with their instances (same namespace and name), sorted by namespace and name.
func Rows(vms []virtv1.VirtualMachine, vmis []virtv1.VirtualMachineInstance) []Row {
	byKey := make(map[string]*virtv1.VirtualMachineInstance, len(vmis))
	for i := range vmis {
		byKey[vmis[i].Namespace+"/"+vmis[i].Name] = &vmis[i]
	}
	rows := make([]Row, 0, len(vms))
	for i := range vms {
		vm := &vms[i]
		r := Row{Kind: KindVM, Namespace: vm.Namespace, Name: vm.Name, Status: string(vm.Status.PrintableStatus), Created: vm.CreationTimestamp.Time, vm: vm}
		if r.Status == "" {
			r.Status = "Unknown"
		}
		r.Ready = meta.IsStatusConditionTrue(vm.Status.Conditions, virtv1.VirtualMachineReady)
		if vmi := byKey[r.Key()]; vmi != nil {
			r.vmi, r.Node, r.Phase, r.IP = vmi, vmi.Status.NodeName, string(vmi.Status.Phase), firstIP(vmi)
		}
		strategy := vm.Spec.EffectiveRunStrategy()
		r.Running = strategy == virtv1.RunStrategyAlways || (r.vmi != nil && !r.vmi.Status.Phase.IsFinal() && strategy != virtv1.RunStrategyHalted)
		rows = append(rows, r)
	}
	sortRows(rows, sortByName, false)
	return rows
}

// InstanceRows are the instances' rows, sorted by namespace and name.
func InstanceRows(vmis []virtv1.VirtualMachineInstance) []Row {
	rows := make([]Row, 0, len(vmis))
	for i := range vmis {
		vmi := &vmis[i]
		r := Row{Kind: KindVMI, Namespace: vmi.Namespace, Name: vmi.Name, Status: string(vmi.Status.Phase), Created: vmi.CreationTimestamp.Time,
			Node: vmi.Status.NodeName, IP: firstIP(vmi), Phase: string(vmi.Status.Phase), Running: true, vmi: vmi,
			Ready: meta.IsStatusConditionTrue(vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady)}
		switch {
		case r.paused():
			r.Status = "Paused"
		case r.Status == "":
			r.Status = "Pending"
		}
		rows = append(rows, r)
	}
	sortRows(rows, sortByName, false)
	return rows
}

// ReplicaSetRows are the replica sets' rows, sorted by namespace and name.
func ReplicaSetRows(sets []virtv1.VirtualMachineInstanceReplicaSet) []Row {
	rows := make([]Row, 0, len(sets))
	for i := range sets {
		rs := &sets[i]
		want := rs.Spec.WantedReplicas()
		r := Row{Kind: KindVMIRS, Namespace: rs.Namespace, Name: rs.Name, Created: rs.CreationTimestamp.Time, rs: rs,
			Status: fmt.Sprintf("%d/%d", rs.Status.ReadyReplicas, want), Ready: rs.Status.ReadyReplicas == want}
		rows = append(rows, r)
	}
	sortRows(rows, sortByName, false)
	return rows
}

func firstIP(vmi *virtv1.VirtualMachineInstance) string {
	if len(vmi.Status.Interfaces) > 0 {
		return vmi.Status.Interfaces[0].IP
	}
	return ""
}

// Why says, in plain words, what blocks the row's object at now (empty when nothing does).
func (r Row) Why(now time.Time) string {
	switch {
	case r.Kind == KindVMIRS && r.rs != nil:
		if c := meta.FindStatusCondition(r.rs.Status.Conditions, virtv1.VirtualMachineInstanceReplicaSetReplicaFailure); c != nil && c.Status == metav1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
		return ""
	case r.Kind == KindVMI:
		return why(nil, r.vmi, now)
	case r.Kind == KindVM:
		return why(r.vm, r.vmi, now)
	}
	return ""
}

// stuckAfter is how long deletion may take before the dashboard calls it stuck.
const stuckAfter = time.Minute

// why is the plain-language reason a VM (nil for a bare instance) does not run as asked, from the
// conditions the controllers and the node agent record.
func why(vm *virtv1.VirtualMachine, vmi *virtv1.VirtualMachineInstance, now time.Time) string {
	if vm != nil {
		if c := meta.FindStatusCondition(vm.Status.Conditions, virtv1.VirtualMachineFailure); c != nil && c.Status == metav1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
		if sf := vm.Status.StartFailure; vm.Status.PrintableStatus == virtv1.VirtualMachineStatusCrashLoopBackOff && sf != nil && sf.RetryAfterTimestamp != nil {
			next := "now"
			if d := sf.RetryAfterTimestamp.Sub(now); d > 0 {
				next = "in " + d.Round(time.Second).String()
			}
			return fmt.Sprintf("CrashLoopBackOff: the guest failed to start %d times in a row; next attempt %s", sf.ConsecutiveFailCount, next)
		}
	}
	var deleted []*metav1.Time
	if vm != nil {
		deleted = append(deleted, vm.DeletionTimestamp)
	}
	if vmi != nil {
		deleted = append(deleted, vmi.DeletionTimestamp)
	}
	for _, del := range deleted {
		if del != nil && now.Sub(del.Time) > stuckAfter {
			return fmt.Sprintf("StuckTerminating: deleted %s ago and still waiting for the guest to shut down; "+
				"a forced stop (ctrl+k) ends it at once", age(del.Time, now))
		}
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

// sortColumn is what the list is sorted by (k9s keys: shift+n name, shift+s status, shift+o node,
// shift+a age).
type sortColumn int

const (
	sortByName sortColumn = iota
	sortByStatus
	sortByNode
	sortByAge
)

// sortKeys maps the sort keys to their columns.
var sortKeys = map[string]sortColumn{"N": sortByName, "S": sortByStatus, "O": sortByNode, "A": sortByAge}

// sortRows sorts rows by col (then namespace and name), descending if desc; ages sort youngest first.
func sortRows(rows []Row, col sortColumn, desc bool) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		c := 0
		switch col {
		case sortByStatus:
			c = cmp.Compare(a.Status, b.Status)
		case sortByNode:
			c = cmp.Compare(a.Node, b.Node)
		case sortByAge:
			c = b.Created.Compare(a.Created)
		}
		if c == 0 {
			c = cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		}
		if desc {
			return -c
		}
		return c
	})
}

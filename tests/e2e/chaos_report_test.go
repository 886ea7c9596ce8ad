//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// maxSampleGap is the longest the qemu sampler may go between two samples (20 emulated guests and
// a compile of podvirt-cluster share 2 cores with it): two guests of a VM overlapping for less than
// that could go unseen. A second guest starts only after virt-controller failed the first instance
// over and a new Pod started, and a first guest that failed to fence would run on for as long as
// its launcher: an overlap would last far longer than this.
const maxSampleGap = 5 * time.Second

// report logs the chaos table and fails on a guest stopped that no fault was allowed to stop, any
// VM seen running twice, or a sampler that looked away too long.
func (c *chaosRun) report(took time.Duration) {
	seen := c.sampler.results()
	unexpected := 0
	for _, e := range seen.ended {
		if !c.wasAllowed(e) {
			unexpected++
			c.t.Errorf("the guest of %s (qemu %d) ended at %s, and no fault was allowed to stop it", e.vm, e.pid, e.at.Format(time.TimeOnly))
		}
	}
	copies := 0
	for vm, n := range seen.most {
		copies = max(copies, n)
		if n > 1 {
			c.t.Errorf("%s: %d guests ran at once", vm, n)
		}
	}
	if seen.gap > maxSampleGap {
		c.t.Errorf("the qemu sampler went %s without a sample (at most %s)", seen.gap.Round(time.Millisecond), maxSampleGap)
	}
	type row struct {
		count, stops int
		worst        time.Duration
		settled      bool
	}
	rows, order := map[string]*row{}, []string{}
	for _, r := range c.results {
		if rows[r.fault] == nil {
			rows[r.fault] = &row{settled: true}
			order = append(order, r.fault)
		}
		w := rows[r.fault]
		w.count++
		w.stops += r.stops
		w.worst = max(w.worst, r.converge)
		w.settled = w.settled && r.settled
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report: %d VMs, %d faults in %s; qemus sampled %d times, at most %s apart\n",
		len(c.vms), len(c.results), took.Round(time.Second), seen.samples, seen.gap.Round(time.Millisecond))
	fmt.Fprintf(&b, "| fault | count | guests it stopped (allowed) | converged | slowest convergence |\n|---|---|---|---|---|\n")
	for _, name := range order {
		w := rows[name]
		fmt.Fprintf(&b, "| %s | %d | %d | %v | %s |\n", name, w.count, w.stops, w.settled, w.worst.Round(time.Second))
	}
	fmt.Fprintf(&b, "guests ended: %d, of them not allowed: %d (want 0); most copies of any VM at once: %d (want 1)\n", len(seen.ended), unexpected, copies)
	c.t.Log(b.String())
}

// wasAllowed tells whether a fault was allowed to stop the guest that ended.
func (c *chaosRun) wasAllowed(e guestEnd) bool {
	for _, a := range c.allowed {
		if a.vm == e.vm && slices.Contains(a.pids, e.pid) {
			return true
		}
	}
	return false
}

// allowedEnds counts the guests of vm that faults stopped, as allowed.
func (c *chaosRun) allowedEnds(vm string) int {
	n := 0
	for _, e := range c.sampler.results().ended {
		if e.vm == vm && c.wasAllowed(e) {
			n++
		}
	}
	return n
}

// checkOrphans fails when, within 3 minutes, launcher Pods still run that no running instance has.
func (c *chaosRun) checkOrphans() {
	err := c.f.Poll(3*time.Minute, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		vmis := &virtv1.VirtualMachineInstanceList{}
		if err := c.f.Client.List(ctx, pods, client.InNamespace(c.f.Namespace), client.MatchingLabels{launcherv1.AppLabel: launcherv1.AppLabelValue}); err != nil {
			return false, err
		}
		if err := c.f.Client.List(ctx, vmis, client.InNamespace(c.f.Namespace)); err != nil {
			return false, err
		}
		current := map[string]bool{}
		for _, vmi := range vmis.Items {
			if vmi.Status.Phase == virtv1.Running {
				current[vmi.Status.LauncherPod] = true
			}
		}
		var orphans []string
		for _, p := range pods.Items {
			if !current[p.Name] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				orphans = append(orphans, fmt.Sprintf("%s (%s on %s)", p.Name, p.Status.Phase, p.Spec.NodeName))
			}
		}
		return len(orphans) == 0, fmt.Errorf("launcher Pods that no running instance has: %v", orphans)
	})
	if err != nil {
		c.t.Errorf("orphans: %v", err)
		return
	}
	c.t.Logf("orphan launcher Pods: 0")
}

// checkRecords stops the records VMs and reads their claims' disk images on this machine: every
// record from the first whole and in order, none that a boot said it synced missing, no boot
// writing again after another had (two guests at once), and no more boots than guests started.
func (c *chaosRun) checkRecords() {
	var names []string
	for _, vm := range c.vms {
		if vm.records {
			names = append(names, vm.name)
			setRunStrategy(c.t, c.f, vm.name, virtv1.RunStrategyHalted)
		}
	}
	c.f.Eventually("the records guests stopped", 3*time.Minute, func(context.Context) (bool, error) {
		for _, name := range names {
			if n := c.sampler.count(name); n != 0 {
				return false, fmt.Errorf("%s: %d qemus", name, n)
			}
		}
		return true, nil
	})
	lost, corrupt, written := 0, 0, 0
	for _, name := range names {
		got, err := c.readRecords(name)
		if err != nil {
			c.t.Errorf("%s: %v", name, err)
			continue
		}
		written += got.valid
		corrupt += got.corrupt
		for boot, acked := range c.acked[name] {
			if got.lastOf[boot] < acked {
				lost += acked - got.lastOf[boot]
				c.t.Errorf("%s: boot %s said it synced record %d, its last on the claim is %d", name, boot, acked, got.lastOf[boot])
			}
		}
		if got.corrupt > 0 || got.interleaved > 0 || got.valid == 0 {
			c.t.Errorf("%s: %d whole records, %d torn or misnumbered, %d times a boot wrote after another had", name, got.valid, got.corrupt, got.interleaved)
		}
		// Each boot is one guest: the first, and one after each guest a fault stopped.
		if boots, most := len(got.lastOf), c.allowedEnds(name)+1; boots > most {
			c.t.Errorf("%s: %d boots wrote records, at most %d guests of it ran: a guest rebooted within its qemu", name, boots, most)
		}
		c.t.Logf("%s: %d records from %d boots", name, got.valid, len(got.lastOf))
	}
	c.t.Logf("records: %d whole on %d claims, lost %d, corrupt %d (want 0 and 0)", written, len(names), lost, corrupt)
}

// readRecords checks the records on the disk image of vm's claim (a hostPath volume of the local
// cluster, on this machine).
func (c *chaosRun) readRecords(vm string) (recordCheck, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	pv := &corev1.PersistentVolume{}
	if err := c.f.Client.Get(c.f.Context(), client.ObjectKey{Namespace: c.f.Namespace, Name: vm}, pvc); err != nil {
		return recordCheck{}, err
	}
	if err := c.f.Client.Get(c.f.Context(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil || pv.Spec.HostPath == nil {
		return recordCheck{}, fmt.Errorf("the volume of claim %s: %v (want a hostPath volume of the local cluster)", vm, err)
	}
	return checkRecords(filepath.Join(pv.Spec.HostPath.Path, "disk.img"))
}

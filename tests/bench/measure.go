//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// measureVMI creates one instance, follows its console, waits until it runs and its guest ran the
// user data, reads the launcher Pod's memory, then deletes it and waits until its Pod is gone.
func (r *runner) measureVMI(ctx context.Context, name string) (vmiRun, error) {
	run := vmiRun{name: name}
	vmi := r.newVMI(name, "")
	var err error
	if run.created, err = r.createVMI(ctx, vmi); err != nil {
		return run, err
	}
	measureErr := r.observeVMI(ctx, &run, string(vmi.UID))
	if err := r.deleteVMI(ctx, &run); err != nil {
		return run, errors.Join(measureErr, err)
	}
	return run, measureErr
}

// observeVMI does measureVMI's observing; the instance is deleted whatever it returns.
func (r *runner) observeVMI(ctx context.Context, run *vmiRun, uid string) error {
	pod, err := r.launcherPod(ctx, uid)
	if err != nil {
		return err
	}
	run.launcherPod = pod.Name

	consoleCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	type result struct {
		times consoleTimes
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ct, err := followConsole(consoleCtx, r.f.Clientset, r.f.Namespace, pod.Name)
		done <- result{ct, err}
	}()
	runErr := r.waitVMIRunning(ctx, run)
	if runErr != nil {
		cancel()
	}
	res := <-done // the follower ends at the user data's exit line, on error, or by consoleCtx
	if runErr != nil {
		return runErr
	}
	if res.err != nil {
		return fmt.Errorf("console of %s: %w", run.name, res.err)
	}
	ct := res.times
	run.firstLogged, run.firstArrived = ct.firstLogged.Sub(run.created), ct.firstArrived.Sub(run.created)
	run.bannerLogged, run.bannerArrived = ct.bannerLogged.Sub(run.created), ct.bannerArrived.Sub(run.created)

	dir, err := podMemoryCgroup(string(pod.UID))
	if err != nil {
		return err
	}
	if run.mem, err = readPodMemory(dir); err != nil {
		return fmt.Errorf("memory of %s: %w", pod.Name, err)
	}
	return r.apiTimes(ctx, run)
}

// measurePod creates one plain Pod, waits until it runs, deletes it and waits until it is gone.
func (r *runner) measurePod(ctx context.Context, name string) (podRun, error) {
	run := podRun{name: name}
	created, err := r.createPod(ctx, r.newPod(name, "100m"))
	if err != nil {
		return run, err
	}
	at, waitErr := r.rec.wait(ctx, podKey(name), "Running", startTimeout, "Failed", "Succeeded")
	if waitErr == nil {
		run.run = at.Sub(created)
		waitErr = r.podAPIRun(ctx, &run)
	}
	if err := r.deletePod(ctx, &run); err != nil {
		return run, errors.Join(waitErr, err)
	}
	return run, waitErr
}

// burst is n objects of one kind created at once.
type burst struct {
	runs     []time.Duration // each one's create → Running
	makespan time.Duration   // first create → last Running
}

// burstPods creates n plain Pods back to back, waits until all run, deletes them all and waits
// until they are gone.
func (r *runner) burstPods(ctx context.Context, n int) (burst, error) {
	runs := make([]*podRun, n)
	created := make([]time.Time, n)
	for i := range n {
		runs[i] = &podRun{name: fmt.Sprintf("burst-pod-%02d", i+1)}
		var err error
		if created[i], err = r.createPod(ctx, r.newPod(runs[i].name, burstCPU)); err != nil {
			return burst{}, err
		}
	}
	b, err := r.waitBurst(ctx, podKeys(runs), created)
	starts := make([]time.Time, n)
	for i, run := range runs {
		start, delErr := r.requestDelete(ctx, &corev1.Pod{}, run.name)
		starts[i], err = start, errors.Join(err, delErr)
	}
	for i, run := range runs {
		err = errors.Join(err, r.waitPodGone(ctx, run, starts[i]))
	}
	return b, err
}

// burstVMIs is burstPods for instances.
func (r *runner) burstVMIs(ctx context.Context, n int) (burst, error) {
	runs := make([]*vmiRun, n)
	created := make([]time.Time, n)
	uids := make([]string, n)
	for i := range n {
		runs[i] = &vmiRun{name: fmt.Sprintf("burst-vmi-%02d", i+1)}
		vmi := r.newVMI(runs[i].name, burstCPU)
		var err error
		if created[i], err = r.createVMI(ctx, vmi); err != nil {
			return burst{}, err
		}
		uids[i] = string(vmi.UID)
	}
	b, err := r.waitBurst(ctx, vmiKeys(runs), created)
	starts := make([]time.Time, n)
	for i, run := range runs {
		if pod, podErr := r.launcherPod(ctx, uids[i]); podErr == nil {
			run.launcherPod = pod.Name
		}
		start, delErr := r.requestDelete(ctx, &virtv1.VirtualMachineInstance{}, run.name)
		starts[i], err = start, errors.Join(err, delErr)
	}
	for i, run := range runs {
		err = errors.Join(err, r.waitVMIGone(ctx, run, starts[i]))
	}
	return b, err
}

func podKeys(runs []*podRun) []string {
	keys := make([]string, len(runs))
	for i, r := range runs {
		keys[i] = podKey(r.name)
	}
	return keys
}

func vmiKeys(runs []*vmiRun) []string {
	keys := make([]string, len(runs))
	for i, r := range runs {
		keys[i] = vmiKey(r.name)
	}
	return keys
}

// burstCPU is the CPU request of burst objects: 20 launchers at the default 100m would not fit
// a 2-core node.
const burstCPU = "10m"

// waitBurst waits until every object of keys runs (Pod and VMI phases are both "Running").
func (r *runner) waitBurst(ctx context.Context, keys []string, created []time.Time) (burst, error) {
	var b burst
	var last time.Time
	for i, key := range keys {
		at, err := r.rec.wait(ctx, key, "Running", startTimeout, "Failed", "Succeeded")
		if err != nil {
			return b, err
		}
		b.runs = append(b.runs, at.Sub(created[i]))
		if at.After(last) {
			last = at
		}
	}
	b.makespan = last.Sub(created[0])
	return b, nil
}

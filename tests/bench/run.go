//go:build bench

package bench

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// Generous limits: the benchmark fails only when something does not happen at all.
const (
	startTimeout  = 5 * time.Minute
	deleteTimeout = 3 * time.Minute
)

// vmiRun is what one measured instance showed. Durations are from the create request.
type vmiRun struct {
	name, launcherPod           string
	created                     time.Time     // local time just before the create request
	scheduling, scheduled, run  time.Duration // VMI phases, as the watch saw them
	apiRun                      time.Duration // phaseTransitionTimestamps Running − creationTimestamp (1 s)
	podStart                    time.Duration // launcher Pod: watch first saw it → Running
	firstLogged, firstArrived   time.Duration // guest's first console output
	bannerLogged, bannerArrived time.Duration // the demo guest's banner
	mem                         memorySample  // read once the user data ran (sequential runs only)
	gone                        time.Duration // delete → launcher Pod gone
	createdStamp, runStamp      time.Time     // apiserver timestamps
}

// podRun is what one plain Pod showed.
type podRun struct {
	name   string
	run    time.Duration // create → Running, as the watch saw it
	apiRun time.Duration // container startedAt − creationTimestamp (1 s)
	gone   time.Duration
}

// runner creates and measures objects in the framework's namespace, all on node (this machine:
// the memory figures read its cgroups).
type runner struct {
	f    *framework.Framework
	rec  *phaseRecorder
	seed virtv1.VirtualMachineInstanceSpec
	node string
}

func vmiKey(name string) string { return "vmi/" + name }
func podKey(name string) string { return "pod/" + name }

// newVMI is the seed's instance (examples/vm-cirros.yaml), with a CPU request when cpu is set.
func (r *runner) newVMI(name, cpu string) *virtv1.VirtualMachineInstance {
	vmi := &virtv1.VirtualMachineInstance{Spec: *r.seed.DeepCopy()}
	vmi.Name, vmi.Namespace = name, r.f.Namespace
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: r.node}
	if cpu != "" {
		vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	return vmi
}

// newPod is the e2e probe sleeping, asking for the guest's memory and the launcher's CPU.
func (r *runner) newPod(name, cpu string) *corev1.Pod {
	pod := r.f.ProbePod(name, corev1.RestartPolicyNever, "sleep")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: r.node}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: r.seed.Domain.Resources.Requests[corev1.ResourceMemory],
	}
	return pod
}

// createVMI creates vmi and returns the local time just before the request.
func (r *runner) createVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (time.Time, error) {
	start := time.Now()
	if err := r.f.Client.Create(ctx, vmi); err != nil {
		return start, fmt.Errorf("create instance %s: %w", vmi.Name, err)
	}
	return start, nil
}

func (r *runner) createPod(ctx context.Context, pod *corev1.Pod) (time.Time, error) {
	start := time.Now()
	if err := r.f.Client.Create(ctx, pod); err != nil {
		return start, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return start, nil
}

// launcherPod waits for the launcher Pod of the instance with uid and returns it.
func (r *runner) launcherPod(ctx context.Context, uid string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := r.f.Client.List(ctx, &pods, client.InNamespace(r.f.Namespace), client.MatchingLabels{launcherv1.CreatedByLabel: uid})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		pod = &pods.Items[0]
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("launcher pod of instance %s: %w", uid, err)
	}
	return pod, nil
}

// waitVMIRunning fills in when the instance passed each phase on its way to Running.
func (r *runner) waitVMIRunning(ctx context.Context, run *vmiRun) error {
	at, err := r.rec.wait(ctx, vmiKey(run.name), string(virtv1.Running), startTimeout, string(virtv1.Failed), string(virtv1.Succeeded))
	if err != nil {
		return err
	}
	run.run = at.Sub(run.created)
	if t, ok := r.rec.first(vmiKey(run.name), string(virtv1.Scheduling)); ok {
		run.scheduling = t.Sub(run.created)
	}
	if t, ok := r.rec.first(vmiKey(run.name), string(virtv1.Scheduled)); ok {
		run.scheduled = t.Sub(run.created)
	}
	podRunning, err := r.rec.wait(ctx, podKey(run.launcherPod), string(corev1.PodRunning), startTimeout, string(corev1.PodFailed))
	if err != nil {
		return err
	}
	if seen, ok := r.rec.firstSeen(podKey(run.launcherPod)); ok {
		run.podStart = podRunning.Sub(seen)
	}
	return nil
}

// apiTimes reads the instance's apiserver timestamps (whole seconds).
func (r *runner) apiTimes(ctx context.Context, run *vmiRun) error {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := r.f.Client.Get(ctx, client.ObjectKey{Namespace: r.f.Namespace, Name: run.name}, vmi); err != nil {
		return fmt.Errorf("get instance %s: %w", run.name, err)
	}
	run.createdStamp = vmi.CreationTimestamp.Time
	for _, p := range vmi.Status.PhaseTransitionTimestamps {
		if p.Phase == virtv1.Running {
			run.runStamp = p.PhaseTransitionTimestamp.Time
			run.apiRun = run.runStamp.Sub(run.createdStamp)
		}
	}
	if run.runStamp.IsZero() {
		return fmt.Errorf("instance %s is Running without a Running phaseTransitionTimestamp", run.name)
	}
	return nil
}

// deleteVMI deletes the instance and waits until it and its launcher Pod are gone.
func (r *runner) deleteVMI(ctx context.Context, run *vmiRun) error {
	start, err := r.requestDelete(ctx, &virtv1.VirtualMachineInstance{}, run.name)
	if err != nil {
		return err
	}
	return r.waitVMIGone(ctx, run, start)
}

// requestDelete deletes the object obj (of the namespace) named name, and returns when it asked.
func (r *runner) requestDelete(ctx context.Context, obj client.Object, name string) (time.Time, error) {
	obj.SetName(name)
	obj.SetNamespace(r.f.Namespace)
	start := time.Now()
	if err := r.f.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return start, fmt.Errorf("delete %T %s: %w", obj, name, err)
	}
	return start, nil
}

// waitVMIGone waits until the instance and its launcher Pod are gone, deleted at start.
func (r *runner) waitVMIGone(ctx context.Context, run *vmiRun, start time.Time) error {
	if _, err := r.rec.wait(ctx, vmiKey(run.name), phaseDeleted, deleteTimeout); err != nil {
		return err
	}
	if run.launcherPod == "" {
		return nil
	}
	at, err := r.rec.wait(ctx, podKey(run.launcherPod), phaseDeleted, deleteTimeout)
	if err != nil {
		return err
	}
	run.gone = at.Sub(start)
	return nil
}

// deletePod deletes a plain Pod and waits until it is gone.
func (r *runner) deletePod(ctx context.Context, run *podRun) error {
	start, err := r.requestDelete(ctx, &corev1.Pod{}, run.name)
	if err != nil {
		return err
	}
	return r.waitPodGone(ctx, run, start)
}

func (r *runner) waitPodGone(ctx context.Context, run *podRun, start time.Time) error {
	at, err := r.rec.wait(ctx, podKey(run.name), phaseDeleted, deleteTimeout)
	if err != nil {
		return err
	}
	run.gone = at.Sub(start)
	return nil
}

// podAPIRun is the Pod's container startedAt − creationTimestamp (whole seconds).
func (r *runner) podAPIRun(ctx context.Context, run *podRun) error {
	pod, err := r.f.Pod(ctx, run.name)
	if err != nil {
		return fmt.Errorf("get pod %s: %w", run.name, err)
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil {
			run.apiRun = s.State.Running.StartedAt.Sub(pod.CreationTimestamp.Time)
			return nil
		}
	}
	return fmt.Errorf("pod %s is Running without a running container", run.name)
}

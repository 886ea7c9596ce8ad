package vmi

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/clusterconfig"
	"github.com/podvirt/podvirt/internal/optionalapi"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "virtualmachineinstance-controller"

// Reconciler reconciles VirtualMachineInstances and their launcher Pods.
type Reconciler struct {
	Client client.Client
	// APIReader reads without the cache: a Pod missing from the cache is confirmed gone with it
	// before the instance is failed.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    podtemplate.Config
	// Cluster is the cluster's configuration: its useEmulation renders launcher Pods without
	// /dev/kvm (Config.UseEmulation is the flag's).
	Cluster *clusterconfig.Source
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
	// Discovery tells whether Multus' API is served (required).
	Discovery discovery.DiscoveryInterface

	writes statuspatch.OwnWrites
}

// SetupWithManager registers the controller for instances and the Pods they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstance").
		For(&virtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		Complete(r)
}

// scope is what one pass observed.
type scope struct {
	vmi *virtv1.VirtualMachineInstance
	// pod is the launcher Pod; nil when absent (confirmed uncached once the instance is past
	// Pending or being deleted).
	pod *corev1.Pod
	// Set only while a Pod is wanted and missing: multusMissing says why the instance must wait
	// for Multus, render is the Pod to create, renderErr why the spec cannot run.
	multusMissing string
	render        *corev1.Pod
	renderErr     error
	now           metav1.Time
}

// Reconcile creates, follows and deletes the launcher Pod: scope, decide, one action, one deferred
// write of the instance's status (none while it is being deleted).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.writes.Behind(vmi) {
		return ctrl.Result{}, nil // the watch event of our last write brings us back
	}
	if vmi.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) {
		patch := client.MergeFrom(vmi.DeepCopy())
		controllerutil.AddFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	s, err := r.observe(ctx, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if vmi.DeletionTimestamp == nil {
		orig := vmi.DeepCopy()
		defer func() {
			res, retErr = statuspatch.Result(res, retErr, r.writeStatus(ctx, orig, vmi))
		}()
	}
	a := decide(s)
	retry, err := r.act(ctx, s, a)
	if err != nil || vmi.DeletionTimestamp != nil {
		return ctrl.Result{RequeueAfter: retry}, err
	}
	return ctrl.Result{RequeueAfter: max(retry, observePod(vmi, s.pod, s.now))}, nil
}

// observe reads the launcher Pod and, when one is wanted and missing, whether it can be made.
func (r *Reconciler) observe(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (*scope, error) {
	s := &scope{vmi: vmi, now: metav1.NewTime(r.Clock.Now())}
	phase := vmi.Status.Phase
	pending := phase == "" || phase == virtv1.Pending
	confirm := vmi.DeletionTimestamp != nil || (!pending && !phase.IsFinal())
	pod, err := r.launcherPod(ctx, vmi, confirm)
	if err != nil {
		return nil, err
	}
	s.pod = pod
	if pod != nil || !pending || vmi.DeletionTimestamp != nil {
		return s, nil
	}
	if s.multusMissing, err = r.multusMissing(vmi); err != nil || s.multusMissing != "" {
		return s, err
	}
	settings, err := r.Cluster.Read(ctx)
	if err != nil {
		return nil, err
	}
	cfg := r.Config
	cfg.UseEmulation = cfg.UseEmulation || settings.UseEmulation
	s.render, s.renderErr = podtemplate.RenderPod(vmi, cfg)
	return s, nil
}

// act carries out the pass's action; retry is how soon to look again when it has to wait.
func (r *Reconciler) act(ctx context.Context, s *scope, a action) (retry time.Duration, err error) {
	vmi := s.vmi
	switch a {
	case actCreatePod:
		s.pod, err = r.createPod(ctx, vmi, s.render)
		return 0, err
	case actDeletePod:
		if err := r.Client.Delete(ctx, s.pod, client.Preconditions{UID: &s.pod.UID}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete launcher pod: %w", err)
		}
		note := "Deleted virtual machine pod %s"
		if vmi.DeletionTimestamp == nil {
			note += ": the instance is " + string(vmi.Status.Phase)
		}
		r.Recorder.Eventf(vmi, s.pod, corev1.EventTypeNormal, virtv1.ReasonSuccessfulDelete, "Delete", note, s.pod.Name)
	case actRelease:
		patch := client.MergeFrom(vmi.DeepCopy())
		controllerutil.RemoveFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("remove finalizer: %w", err)
		}
	case actHold:
		r.hold(vmi, s.multusMissing, s.now)
		return optionalapi.Recheck, nil
	case actRefuse:
		vmi.Status.SetPhase(virtv1.Failed, virtv1.ReasonInvalidSpec, s.now)
		setReady(&vmi.Status, virtv1.ReasonInvalidSpec, s.renderErr.Error())
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, virtv1.ReasonInvalidSpec, "Create", "Cannot run this instance: %v", s.renderErr)
	}
	return 0, nil
}

// launcherPod returns the instance's launcher Pod (status.launcherPod: after a migration, the
// target's), or nil when it is absent. With confirm, a Pod missing from the cache is looked up in
// the apiserver before it counts as gone.
func (r *Reconciler) launcherPod(ctx context.Context, vmi *virtv1.VirtualMachineInstance, confirm bool) (*corev1.Pod, error) {
	name := vmi.Status.LauncherPod
	if name == "" {
		name = podtemplate.PodName(vmi)
	}
	key := client.ObjectKey{Namespace: vmi.Namespace, Name: name}
	pod := &corev1.Pod{}
	err := r.Client.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) && confirm {
		err = r.APIReader.Get(ctx, key, pod)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get launcher pod: %w", err)
	case !metav1.IsControlledBy(pod, vmi):
		return nil, fmt.Errorf("pod %s exists and is not controlled by this instance", pod.Name)
	}
	return pod, nil
}

// createPod creates the launcher Pod (after its persistent state claim). An apiserver refusal is
// reported in the Synchronized condition and retried.
func (r *Reconciler) createPod(ctx context.Context, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod) (*corev1.Pod, error) {
	if err := r.ensurePersistentState(ctx, vmi); err != nil {
		r.setCreateFailed(vmi, err)
		return nil, err
	}
	err := r.Client.Create(ctx, pod)
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier pass whose result the cache has not seen yet.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		if err == nil && !metav1.IsControlledBy(pod, vmi) {
			err = fmt.Errorf("pod %s exists and is not controlled by this instance", pod.Name)
		}
	} else if err == nil {
		r.Recorder.Eventf(vmi, pod, corev1.EventTypeNormal, virtv1.ReasonSuccessfulCreate, "Create", "Created virtual machine pod %s", pod.Name)
	}
	if err != nil {
		r.setCreateFailed(vmi, err)
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, virtv1.ReasonFailedCreate, "Create", "Error creating pod: %v", err)
		return nil, fmt.Errorf("create launcher pod: %w", err)
	}
	return pod, nil
}

// setCreateFailed keeps the instance Pending and says in Synchronized what could not be created.
func (r *Reconciler) setCreateFailed(vmi *virtv1.VirtualMachineInstance, err error) {
	vmi.Status.SetPhase(virtv1.Pending, "", metav1.NewTime(r.Clock.Now()))
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: virtv1.ReasonFailedCreate, Message: err.Error(),
	})
}

// writeStatus writes the status if it changed (the node agent writes the same object: see
// statuspatch) and records an Event when the instance ended.
func (r *Reconciler) writeStatus(ctx context.Context, orig, vmi *virtv1.VirtualMachineInstance) error {
	wrote, err := r.writes.Write(ctx, r.Client, orig, vmi, "instance")
	if err != nil || !wrote {
		return err
	}
	if orig.Status.Phase != vmi.Status.Phase && vmi.Status.Phase.IsFinal() {
		eventType := corev1.EventTypeNormal
		if vmi.Status.Phase == virtv1.Failed {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(vmi, nil, eventType, string(vmi.Status.Phase), "Observe", "The instance is %s: %s", vmi.Status.Phase, vmi.Status.Reason)
	}
	return nil
}

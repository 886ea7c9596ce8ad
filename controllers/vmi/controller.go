package vmi

import (
	"context"
	"fmt"

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

// Reconcile creates, follows and deletes the launcher Pod and writes the instance's status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	vmi := &virtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.writes.Behind(vmi) {
		return ctrl.Result{}, nil // the watch event of our last write brings us back
	}
	if vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, r.reconcileDelete(ctx, vmi)
	}
	if !controllerutil.ContainsFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) {
		patch := client.MergeFrom(vmi.DeepCopy())
		controllerutil.AddFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := vmi.DeepCopy()
	defer func() {
		res, retErr = statuspatch.Result(res, retErr, r.writeStatus(ctx, orig, vmi))
	}()
	return r.reconcileNormal(ctx, vmi)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (ctrl.Result, error) {
	if vmi.Status.Phase.IsFinal() {
		return ctrl.Result{}, r.stopFinishedPod(ctx, vmi)
	}
	pod, err := r.launcherPod(ctx, vmi, vmi.Status.Phase != "" && vmi.Status.Phase != virtv1.Pending)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil && (vmi.Status.Phase == "" || vmi.Status.Phase == virtv1.Pending) {
		held, retry, err := r.holdForMultus(vmi)
		if held || err != nil {
			return ctrl.Result{RequeueAfter: retry}, err
		}
		if pod, err = r.createPod(ctx, vmi); pod == nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: observePod(vmi, pod, metav1.NewTime(r.Clock.Now()))}, nil
}

// stopFinishedPod deletes the launcher Pod of a final instance if it still runs (e.g. the guest
// never started): no guest will ever run in it again. A completed Pod is kept for its logs.
func (r *Reconciler) stopFinishedPod(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	pod, err := r.launcherPod(ctx, vmi, false)
	if err != nil || pod == nil || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return err
	}
	if err := r.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete launcher pod of a finished instance: %w", err)
	}
	r.Recorder.Eventf(vmi, pod, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "Deleted virtual machine pod %s: the instance is %s", pod.Name, vmi.Status.Phase)
	return nil
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

// createPod renders and creates the launcher Pod. A spec that cannot run fails the instance with a
// reason naming the field; an apiserver refusal is reported in the Synchronized condition and retried.
func (r *Reconciler) createPod(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pod, err := podtemplate.RenderPod(vmi, r.Config)
	if err != nil {
		vmi.Status.SetPhase(virtv1.Failed, virtv1.ReasonInvalidSpec, metav1.NewTime(r.Clock.Now()))
		setReady(&vmi.Status, virtv1.ReasonInvalidSpec, err.Error())
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, virtv1.ReasonInvalidSpec, "Create", "Cannot run this instance: %v", err)
		return nil, nil
	}
	if err := r.ensurePersistentState(ctx, vmi); err != nil {
		r.setCreateFailed(vmi, err)
		return nil, err
	}
	err = r.Client.Create(ctx, pod)
	if apierrors.IsAlreadyExists(err) {
		// Created by an earlier pass whose result the cache has not seen yet.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), pod)
		if err == nil && !metav1.IsControlledBy(pod, vmi) {
			err = fmt.Errorf("pod %s exists and is not controlled by this instance", pod.Name)
		}
	} else if err == nil {
		r.Recorder.Eventf(vmi, pod, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "Created virtual machine pod %s", pod.Name)
	}
	if err != nil {
		r.setCreateFailed(vmi, err)
		r.Recorder.Eventf(vmi, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "Error creating pod: %v", err)
		return nil, fmt.Errorf("create launcher pod: %w", err)
	}
	return pod, nil
}

// setCreateFailed keeps the instance Pending and says in Synchronized what could not be created.
func (r *Reconciler) setCreateFailed(vmi *virtv1.VirtualMachineInstance, err error) {
	vmi.Status.SetPhase(virtv1.Pending, "", metav1.NewTime(r.Clock.Now()))
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: "FailedCreate", Message: err.Error(),
	})
}

// reconcileDelete deletes the launcher Pod (its grace period covers the guest's shutdown) and
// releases the instance once the Pod is gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	if !controllerutil.ContainsFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer) {
		return nil
	}
	pod, err := r.launcherPod(ctx, vmi, true)
	if err != nil {
		return err
	}
	if pod != nil {
		if pod.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete launcher pod: %w", err)
			}
			r.Recorder.Eventf(vmi, pod, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "Deleted virtual machine pod %s", pod.Name)
		}
		return nil // the Pod's deletion brings us back
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	controllerutil.RemoveFinalizer(vmi, virtv1.VirtualMachineControllerFinalizer)
	if err := r.Client.Patch(ctx, vmi, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
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

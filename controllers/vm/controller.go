package vm

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/instancetype"
	"github.com/podvirt/podvirt/internal/optionalapi"
	"github.com/podvirt/podvirt/internal/statuspatch"
)

// ControllerName is the name Events and logs carry.
const ControllerName = "virtualmachine-controller"

// claimIndex indexes VirtualMachines by the PersistentVolumeClaims their template uses.
const claimIndex = "spec.template.spec.volumes.persistentVolumeClaim.claimName"

// Reconciler reconciles VirtualMachines.
type Reconciler struct {
	Client client.Client
	// APIReader reads without the cache: adoption re-checks the VM with it.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Clock tells the time; the real clock when nil.
	Clock clock.PassiveClock
	// Discovery tells whether CDI's API is served (required).
	Discovery discovery.DiscoveryInterface

	writes statuspatch.OwnWrites
}

// SetupWithManager registers the controller: VirtualMachines, their instances (owned or orphaned:
// an instance has its VirtualMachine's name) and the claims their templates use.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &virtv1.VirtualMachine{}, claimIndex, claimNames); err != nil {
		return fmt.Errorf("index VirtualMachines by claim: %w", err)
	}
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	byClaim := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var vms virtv1.VirtualMachineList
		if err := r.Client.List(ctx, &vms, client.InNamespace(o.GetNamespace()), client.MatchingFields{claimIndex: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).WithValues("controller", "virtualmachine").Error(err,
				"Cannot list the VirtualMachines that use a claim; its change reaches them at their next event", "claim", klog.KObj(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(vms.Items))
		for i := range vms.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachine").
		For(&virtv1.VirtualMachine{}).
		Watches(&virtv1.VirtualMachineInstance{}, sameName).
		Watches(&corev1.PersistentVolumeClaim{}, byClaim).
		Complete(r)
}

func claimNames(o client.Object) []string {
	vm := o.(*virtv1.VirtualMachine)
	if vm.Spec.Template == nil {
		return nil
	}
	var names []string
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if name, _, ok := v.Claim(); ok {
			names = append(names, name)
		}
	}
	return names
}

// scope is what one reconcile observed.
type scope struct {
	vm   *virtv1.VirtualMachine
	vmi  *virtv1.VirtualMachineInstance // nil when none exists
	vols volumeState
	now  time.Time
}

// Reconcile makes the instance match the run strategy and writes the VM's status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	vm := &virtv1.VirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.writes.Behind(vm) {
		return ctrl.Result{}, nil // the watch event of our last write brings us back
	}
	s := &scope{vm: vm, now: r.Clock.Now()}
	orig := vm.DeepCopy()
	defer func() {
		// The optimistic lock keeps a concurrently appended state-change request from being lost.
		_, err := r.writes.Write(ctx, r.Client, orig, vm, "VirtualMachine")
		res, retErr = statuspatch.Result(res, retErr, err)
	}()

	if err := r.observe(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if vm.DeletionTimestamp != nil {
		r.setStatus(s, decision{})
		return ctrl.Result{}, nil // the garbage collector deletes (or orphans) the instance
	}
	return r.reconcileNormal(ctx, s)
}

// observe fetches the instance (adopting an orphan of the same name) and the claims.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	vmi := &virtv1.VirtualMachineInstance{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.vm), vmi)
	if apierrors.IsNotFound(err) && stopRequested(s.vm) {
		// A Stop request for an instance the cache has not seen yet (just created) would be dropped
		// as done: confirm the instance is gone before deciding.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.vm), vmi)
	}
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get instance: %w", err)
	default:
		s.vmi = vmi
		if err := r.adopt(ctx, s); err != nil {
			return err
		}
	}
	vols, err := r.claims(ctx, s.vm)
	if err != nil {
		return err
	}
	s.vols = vols
	return nil
}

// stopRequested reports whether the first state-change request stops a particular instance.
func stopRequested(vm *virtv1.VirtualMachine) bool {
	reqs := vm.Status.StateChangeRequests
	return len(reqs) > 0 && reqs[0].Action == virtv1.StopRequest && reqs[0].UID != nil
}

// adopt takes an orphaned instance of this VM's name under its control. Before adopting it
// re-reads the VM without the cache: a VM that is being deleted must not adopt.
func (r *Reconciler) adopt(ctx context.Context, s *scope) error {
	ref := metav1.GetControllerOf(s.vmi)
	if ref != nil {
		if ref.UID != s.vm.UID {
			return reconcile.TerminalError(fmt.Errorf("instance %s is controlled by %s %s (uid %s), not by this VirtualMachine", s.vmi.Name, ref.Kind, ref.Name, ref.UID))
		}
		return nil
	}
	if s.vm.DeletionTimestamp != nil || s.vmi.DeletionTimestamp != nil {
		return nil
	}
	fresh := &virtv1.VirtualMachine{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.vm), fresh); err != nil {
		return fmt.Errorf("re-check VirtualMachine before adoption: %w", err)
	}
	if fresh.UID != s.vm.UID || fresh.DeletionTimestamp != nil {
		return fmt.Errorf("VirtualMachine changed during adoption of %s; retrying", s.vmi.Name)
	}
	patch := client.MergeFromWithOptions(s.vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.SetControllerReference(s.vm, s.vmi, r.Client.Scheme()); err != nil {
		return fmt.Errorf("set owner of instance: %w", err)
	}
	if err := r.Client.Patch(ctx, s.vmi, patch); err != nil {
		return fmt.Errorf("adopt instance: %w", err)
	}
	r.Recorder.Eventf(s.vm, s.vmi, corev1.EventTypeNormal, "SuccessfulAdopt", "Adopt", "Adopted orphaned virtual machine instance %s", s.vmi.Name)
	return nil
}

// claims reports which claims of the template are missing or not bound.
func (r *Reconciler) claims(ctx context.Context, vm *virtv1.VirtualMachine) (volumeState, error) {
	var vs volumeState
	for _, name := range claimNames(vm) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: name}, pvc)
		switch {
		case apierrors.IsNotFound(err):
			vs.missing = append(vs.missing, name)
		case err != nil:
			return vs, fmt.Errorf("get claim %s: %w", name, err)
		case pvc.Status.Phase != corev1.ClaimBound:
			vs.unbound = append(vs.unbound, name)
		}
	}
	for _, name := range dataVolumeClaims(vm) {
		if slices.Contains(vs.missing, name) {
			vs.fromDataVolumes = append(vs.fromDataVolumes, name)
		}
	}
	return vs, nil
}

// observeCDI asks whether CDI is installed, once per pass and only when the answer matters: the VM
// is to start (its DataVolumes are created, or its missing DataVolume claims wait for CDI) or has an
// instance (whose missing claims the Ready condition explains). A stopped VM asks nothing.
func (r *Reconciler) observeCDI(s *scope, d decision) (installed bool, err error) {
	starting := d.action == actCreate
	if !starting && s.vmi == nil {
		return false, nil
	}
	if len(s.vols.fromDataVolumes) == 0 && (!starting || len(s.vm.Spec.DataVolumeTemplates) == 0) {
		return false, nil
	}
	if installed, err = r.cdiInstalled(); err != nil || installed {
		return installed, err
	}
	s.vols.noCDI = true
	return false, nil
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	recordStartFailure(s.vm, s.vmi, s.now)
	d := decide(s.vm, observe(s.vmi), s.now)
	cdi, err := r.observeCDI(s, d)
	if err == nil && cdi && d.action == actCreate && len(s.vm.Spec.DataVolumeTemplates) > 0 {
		// A missing instancetype or preference stops the start below (act), saying so.
		specs, _ := instancetype.Live(ctx, r.APIReader, s.vm)
		err = r.ensureDataVolumes(ctx, s.vm, specs.Preference)
	}
	if err != nil {
		r.setStatus(s, d)
		return ctrl.Result{}, err
	}
	if d.action == actCreate && len(s.vols.missing) > 0 {
		// Creating the instance now would only give a Pod that cannot start; wait for the claim.
		reason, message := s.vols.missingMessage()
		if c := meta.FindStatusCondition(s.vm.Status.Conditions, virtv1.VirtualMachineReady); c == nil || c.Reason != reason || c.Message != message {
			r.Recorder.Eventf(s.vm, nil, corev1.EventTypeWarning, reason, "Start", "Waiting to start: %s", message)
		}
		d.action, d.stoppedReason, d.waitingForClaims = actNone, "", true
	}
	err = r.act(ctx, s, d)
	if err == nil && d.dropRequest {
		s.vm.Status.StateChangeRequests = s.vm.Status.StateChangeRequests[1:]
		if len(s.vm.Status.StateChangeRequests) == 0 {
			s.vm.Status.StateChangeRequests = nil
		}
	}
	if err == nil && d.queueStart {
		s.vm.Status.StateChangeRequests = append(s.vm.Status.StateChangeRequests, virtv1.VirtualMachineStateChangeRequest{Action: virtv1.StartRequest})
	}
	if err == nil && !startHeldBack(d, s.vmi) {
		// Recorded once acted on: RerunOnFailure and Once start only while it differs.
		s.vm.Status.RunStrategy = s.vm.Spec.EffectiveRunStrategy()
	}
	r.setStatus(s, d)
	if err != nil {
		return ctrl.Result{}, err
	}
	result := ctrl.Result{RequeueAfter: d.retryAfter}
	if d.waitingForClaims && len(s.vols.waitingForCDI()) > 0 && (result.RequeueAfter == 0 || result.RequeueAfter > optionalapi.Recheck) {
		result.RequeueAfter = optionalapi.Recheck
	}
	return result, nil
}

// startHeldBack reports whether the decision defers a start that the run strategy asked for
// (waiting for claims, or the crash-loop backoff with no instance).
func startHeldBack(d decision, vmi *virtv1.VirtualMachineInstance) bool {
	return d.waitingForClaims || (d.retryAfter > 0 && vmi == nil)
}

// act carries out the decision's action on the instance.
func (r *Reconciler) act(ctx context.Context, s *scope, d decision) error {
	switch d.action {
	case actCreate:
		specs, err := instancetype.Pin(ctx, r.APIReader, r.Client, s.vm)
		var vmi *virtv1.VirtualMachineInstance
		if err == nil {
			vmi, err = newInstance(s.vm, specs)
		}
		if err == nil {
			err = controllerutil.SetControllerReference(s.vm, vmi, r.Client.Scheme())
		}
		if err == nil {
			err = r.Client.Create(ctx, vmi)
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("instance %s still exists; waiting for it to go: %w", s.vm.Name, err)
		}
		if err != nil {
			r.Recorder.Eventf(s.vm, nil, corev1.EventTypeWarning, virtv1.ReasonFailedCreate, "Create", "Error creating virtual machine instance: %v", err)
			setFailureCondition(s.vm, err, virtv1.ReasonFailedCreate)
			return fmt.Errorf("create instance: %w", err)
		}
		s.vmi = vmi
		r.Recorder.Eventf(s.vm, vmi, corev1.EventTypeNormal, virtv1.ReasonSuccessfulCreate, "Create", "Created virtual machine: %s", vmi.Name)
	case actDelete:
		err := r.Client.Delete(ctx, s.vmi, client.Preconditions{UID: &s.vmi.UID})
		if client.IgnoreNotFound(err) != nil {
			r.Recorder.Eventf(s.vm, s.vmi, corev1.EventTypeWarning, "FailedDelete", "Delete", "Error deleting virtual machine instance %s: %v", s.vmi.Name, err)
			setFailureCondition(s.vm, err, "FailedDelete")
			return fmt.Errorf("delete instance: %w", err)
		}
		r.Recorder.Eventf(s.vm, s.vmi, corev1.EventTypeNormal, virtv1.ReasonSuccessfulDelete, "Delete", "Stopped the virtual machine by deleting the virtual machine instance %s", s.vmi.UID)
		now := metav1.NewTime(s.now)
		s.vmi.DeletionTimestamp = &now // observed effect of our own delete, for this pass's status
	}
	setFailureCondition(s.vm, nil, "")
	return nil
}

// setStatus computes the whole status from this pass's observations.
func (r *Reconciler) setStatus(s *scope, d decision) {
	st := &s.vm.Status
	st.Created = s.vmi != nil
	st.Ready = s.vmi != nil && conditionTrue(s.vmi.Status.Conditions, virtv1.VirtualMachineInstanceReady)
	st.PrintableStatus = printableStatus(s.vm, s.vmi, s.vols, d)
	st.ObservedGeneration = s.vm.Generation
	st.DesiredGeneration = s.vm.Generation
	setReadyCondition(s.vm, s.vmi, s.vols, wantsInstance(d, s.vmi))
	setPausedCondition(s.vm, s.vmi)
	setRestartRequiredCondition(s.vm, s.vmi, templateHash(s.vm))
	setStoppedCondition(s.vm, s.vmi, d)
}

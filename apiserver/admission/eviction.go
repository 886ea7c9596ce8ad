package admission

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// PathEvictLauncher intercepts the evictions of Pods (kubectl drain, the cluster autoscaler).
const PathEvictLauncher = "/launcher-eviction-interceptor"

// evictionInterceptor lets every eviction through except that of the launcher Pod of a running
// instance that is to live-migrate away instead (evictionStrategy LiveMigrate, or
// LiveMigrateIfPossible when it is live-migratable, or External): that instance is marked for evacuation
// (status.evacuationNodeName, which the migration controller turns into a migration) and the
// eviction is refused with 429 Too Many Requests, which kubectl drain retries. Once the guest has
// moved, the source Pod has completed and its eviction goes through. Once the evacuation has given
// up (virtv1.MaxEvacuationAttempts failed migrations off the node), the eviction goes through with
// a warning: the guest stops, and the drain ends. External: the mark is for another controller,
// which moves or stops the guest; the eviction is refused until the Pod is gone.
type evictionInterceptor struct {
	client client.Client
	// policy: External is honoured only while the cluster allows it (an instance admitted before
	// it stopped allowing it is evicted as with None); instances that set no strategy have the
	// cluster's default.
	policy PolicySource
}

func (h evictionInterceptor) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "eviction" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := h.client.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
		return admission.Allowed("") // the eviction API answers for a Pod that is not there
	}
	owner := metav1.GetControllerOf(pod)
	if pod.Labels[launcherv1.AppLabel] != launcherv1.AppLabelValue || owner == nil || owner.Kind != "VirtualMachineInstance" {
		return admission.Allowed("")
	}
	vmi := &virtv1.VirtualMachineInstance{}
	err := h.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: owner.Name}, vmi)
	if apierrors.IsNotFound(err) {
		return admission.Allowed("")
	}
	if err != nil {
		return retryLater(fmt.Errorf("get instance %s: %w", owner.Name, err))
	}
	policy, err := h.policy.get(ctx)
	if err != nil && vmi.Spec.EvictionStrategy == nil { // the cluster's default was needed
		return retryLater(err)
	}
	strategy := policy.evictionStrategy(&vmi.Spec)
	external := policy.ExternalEviction && strategy == virtv1.EvictionStrategyExternal
	if !(migratesOnEviction(vmi, strategy) || external) || vmi.UID != owner.UID || vmi.Status.Phase != virtv1.Running || vmi.Status.LauncherPod != pod.Name {
		return admission.Allowed("")
	}
	if external { // another controller moves or stops it; it sees status.evacuationNodeName
		if err := markEvacuation(ctx, h.client, vmi, pod.Spec.NodeName, req.DryRun); err != nil {
			return retryLater(err)
		}
		return retryLater(fmt.Errorf("Eviction triggered evacuation of VMI %s/%s: its evictionStrategy is External, so the controller handling it moves or stops it (status.evacuationNodeName %s)", vmi.Namespace, vmi.Name, pod.Spec.NodeName))
	}
	migrations := &virtv1.VirtualMachineInstanceMigrationList{}
	if err := h.client.List(ctx, migrations, client.InNamespace(vmi.Namespace)); err != nil {
		return retryLater(fmt.Errorf("list the migrations of instance %s: %w", vmi.Name, err))
	}
	if failed := virtv1.FailedEvacuations(migrations.Items, vmi, pod.Spec.NodeName, time.Now()); failed >= virtv1.MaxEvacuationAttempts {
		return admission.Allowed("").WithWarnings(fmt.Sprintf("VMI %s/%s could not live-migrate off node %s (%d migrations failed): the eviction stops it",
			vmi.Namespace, vmi.Name, pod.Spec.NodeName, failed))
	}
	if err := markEvacuation(ctx, h.client, vmi, pod.Spec.NodeName, req.DryRun); err != nil {
		return retryLater(err)
	}
	return retryLater(fmt.Errorf("Eviction triggered evacuation of VMI %s/%s: it live-migrates off node %s, then its launcher Pod completes", vmi.Namespace, vmi.Name, pod.Spec.NodeName))
}

// markEvacuation sets the instance's status.evacuationNodeName to node, unless it is so already or
// the eviction is a dry run.
func markEvacuation(ctx context.Context, c client.Client, vmi *virtv1.VirtualMachineInstance, node string, dryRun *bool) error {
	if vmi.Status.EvacuationNodeName == node || (dryRun != nil && *dryRun) {
		return nil
	}
	patch := client.MergeFrom(vmi.DeepCopy())
	vmi.Status.EvacuationNodeName = node
	if err := c.Status().Patch(ctx, vmi, patch); err != nil {
		return fmt.Errorf("mark instance %s for evacuation: %w", vmi.Name, err)
	}
	return nil
}

// retryLater refuses the eviction for now (429, which kubectl drain retries) because of err: the
// instance may have to migrate, so it is not let through on a failure.
func retryLater(err error) admission.Response {
	resp := admission.Denied(err.Error() + "; try again")
	resp.Result.Code = http.StatusTooManyRequests
	return resp
}

// migratesOnEviction reports whether the instance live-migrates rather than stops when its launcher
// Pod is evicted.
func migratesOnEviction(vmi *virtv1.VirtualMachineInstance, strategy virtv1.EvictionStrategy) bool {
	switch strategy {
	case virtv1.EvictionStrategyLiveMigrate:
		return true
	case virtv1.EvictionStrategyLiveMigrateIfPossible:
		c := meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceLiveMigratable)
		return c != nil && c.Status == metav1.ConditionTrue
	}
	return false
}

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	"github.com/podvirt/podvirt/tests/framework"
)

// virt-api runs two replicas behind a PodDisruptionBudget: a drain evicts one, not both, and the
// subresources are served again within seconds of losing one, by the other, before its replacement
// is ready.
func TestVirtAPIKeepsServingWhenAReplicaIsEvicted(t *testing.T) {
	f := framework.New(t)
	requireVirtAPI(f)
	ctx := f.Context()
	bothReady := func(what string) {
		f.Eventually(what, 3*time.Minute, func(ctx context.Context) (bool, error) {
			d := &appsv1.Deployment{}
			if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-api"}, d); err != nil {
				return false, err
			}
			return d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.Replicas == 2,
				fmt.Errorf("replicas %d, ready %d, updated %d", d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		})
	}
	bothReady("two virt-api replicas ready")
	pods := &corev1.PodList{}
	if err := f.Client.List(ctx, pods, client.InNamespace("podvirt"), client.MatchingLabels{"app.kubernetes.io/name": "virt-api"}); err != nil || len(pods.Items) != 2 {
		t.Fatalf("virt-api Pods: %v (%d, want 2)", err, len(pods.Items))
	}
	f.Eventually("the PodDisruptionBudget allows one disruption", time.Minute, func(ctx context.Context) (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-api"}, pdb); err != nil {
			return false, err
		}
		return pdb.Status.DisruptionsAllowed == 1, fmt.Errorf("disruptions allowed %d", pdb.Status.DisruptionsAllowed)
	})
	evict := func(p corev1.Pod) error {
		return f.Clientset.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
	}
	if err := evict(pods.Items[0]); err != nil {
		t.Fatalf("evict virt-api %s: %v", pods.Items[0].Name, err)
	}
	evicted := time.Now()
	if err := evict(pods.Items[1]); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting the second virt-api (%s) right after the first: %v, want 429 from the PodDisruptionBudget", pods.Items[1].Name, err)
	}
	var served time.Duration
	f.Eventually("the subresources are served by the remaining replica", time.Minute, func(ctx context.Context) (bool, error) {
		err := f.Clientset.Discovery().RESTClient().Get().AbsPath("/apis/" + subv1.GroupName + "/v1/" + subv1.Version).Do(ctx).Error()
		if err != nil {
			return false, err
		}
		code, err := subresourceCall(ctx, t, f.Config, f.Namespace, "absent", "start")
		served = time.Since(evicted)
		return code == 404, fmt.Errorf("start of an absent VM: %d %v, want 404", code, err)
	})
	d := &appsv1.Deployment{}
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: "podvirt", Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	t.Logf("served again %s after the eviction (%d of 2 replicas ready then)", served.Round(time.Millisecond), d.Status.ReadyReplicas)
	bothReady("the evicted replica replaced")
}

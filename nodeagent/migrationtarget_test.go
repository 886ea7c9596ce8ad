package nodeagent

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/scheme"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
	"github.com/podvirt/podvirt/nodeagent/launchertest"
)

// A migration target's launcher, whose guest may have arrived, is asked like every other launcher:
// not at all while the agent does not vouch (so that an arrived guest fences when its node is cut
// off), and otherwise with the vouch of the moment, even while its instance cannot be read (a
// control-plane outage stops no guest).
func TestMigrationTargetIsAskedOnlyWhileVouching(t *testing.T) {
	dir := t.TempDir()
	l, err := launchertest.Start(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })

	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
		Status: virtv1.VirtualMachineInstanceStatus{MigrationState: &virtv1.VirtualMachineInstanceMigrationState{
			TargetPod: "target", MigrationUID: "mig-uid", TargetNode: "n2", SourceNode: "n1",
		}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "target", Labels: map[string]string{launcherv1.MigrationJobLabel: "mig-uid"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "vm", UID: "vmi-uid", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(vmi, pod).WithStatusSubresource(vmi).Build()
	vouching := false
	r := &MigrationTargetReconciler{
		Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), NodeName: "n2",
		Dial:         func(*corev1.Pod) Launcher { return launcherclient.New(dir) },
		PollInterval: time.Second,
		Vouch:        func() (bool, time.Duration) { return vouching, 42 * time.Second },
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}

	res, err := r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, time.Second, res.RequeueAfter, "asked again within the poll interval")
	assert.Empty(t, l.Polls(), "a target launcher asked while the agent does not vouch")

	vouching = true
	_, _ = r.Reconcile(context.Background(), req) // the double cannot prepare a target; the status came first
	vouch := strconv.FormatInt(int64(42*time.Second), 10)
	assert.Equal(t, []string{vouch}, l.Vouches(), "the target asked with the vouch")

	// The control plane away: the instance cannot be read, and an arrived guest is still asked for.
	r.APIReader = unreachable{}
	_, err = r.Reconcile(context.Background(), req)
	require.Error(t, err)
	assert.Equal(t, []string{vouch, vouch}, l.Vouches(), "the target asked while its instance could not be read")
}

// unreachable is an apiserver that does not answer.
type unreachable struct{}

func (unreachable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("the apiserver does not answer")
}

func (unreachable) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the apiserver does not answer")
}

package apiserver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/podvirt/podvirt/internal/scheme"
)

func TestNodeCertsCopyTheAgentsShareOnly(t *testing.T) {
	ctx := context.Background()
	from := types.NamespacedName{Namespace: "podvirt", Name: "virt-handler-ca"}
	to := types.NamespacedName{Namespace: "podvirt", Name: "virt-handler-certs"}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: from.Namespace, Name: from.Name}, Data: map[string][]byte{
		"ca.crt": []byte("ca"), "ca.key": []byte("CA KEY"), "tls.crt": []byte("crt"), "tls.key": []byte("key"),
	}}
	dst := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: to.Namespace, Name: to.Name}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(src, dst).Build()
	n := &NodeCerts{Client: c, From: from, To: to}

	_, err := n.Reconcile(ctx, ctrl.Request{NamespacedName: from})
	require.NoError(t, err)
	got := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, to, got))
	assert.Equal(t, map[string][]byte{"ca.crt": []byte("ca")}, got.Data,
		"the agents get the CA certificate only: never the CA's key, nor virt-api's client key (each agent has a key of its own)")

	got.Data["ca.crt"] = []byte("tampered")
	require.NoError(t, c.Update(ctx, got))
	_, err = n.Reconcile(ctx, ctrl.Request{NamespacedName: to})
	require.NoError(t, err)
	require.NoError(t, c.Get(ctx, to, got))
	assert.Equal(t, []byte("ca"), got.Data["ca.crt"], "a changed copy is restored")
}

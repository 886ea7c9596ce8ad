package apiserver

import (
	"context"
	"os"
	"path/filepath"
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

func TestCertFilesMirrorTheSecret(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "podvirt", Name: "virt-api-certs"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	dir := t.TempDir()
	cf := &CertFiles{Client: c, Secret: key, Dir: dir}
	crt, keyFile := filepath.Join(dir, corev1.TLSCertKey), filepath.Join(dir, corev1.TLSPrivateKeyKey)

	_, err := cf.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	assert.NoFileExists(t, crt, "an empty Secret (not yet filled by the rotator) writes nothing")

	secret.Data = map[string][]byte{corev1.TLSCertKey: []byte("cert-1"), corev1.TLSPrivateKeyKey: []byte("key-1"), "ca.key": []byte("secret")}
	require.NoError(t, c.Update(ctx, secret))
	_, err = cf.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	got, _ := os.ReadFile(crt)
	assert.Equal(t, "cert-1", string(got))
	got, _ = os.ReadFile(keyFile)
	assert.Equal(t, "key-1", string(got))
	assert.NoFileExists(t, filepath.Join(dir, "ca.key"), "the CA's key never leaves the Secret")
	info, err := os.Stat(keyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = []byte("cert-2"), []byte("key-2")
	require.NoError(t, c.Update(ctx, secret))
	_, err = cf.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	got, _ = os.ReadFile(crt)
	assert.Equal(t, "cert-2", string(got), "a rotated certificate replaces the file")
}

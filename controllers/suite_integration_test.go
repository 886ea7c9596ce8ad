package controllers_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/controllers"
	"github.com/podvirt/podvirt/controllers/podtemplate"
	"github.com/podvirt/podvirt/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(testenv.Run(m, &env))
}

const wait = 30 * time.Second

// startControllers runs the shipped controllers, watching only ns, until the test ends (or the
// returned stop function is called). It returns the stop function. opts adjust the options.
func startControllers(t *testing.T, ns string, opts ...func(*controllers.Options)) func() {
	t.Helper()
	o := controllers.Options{
		Launcher:           podtemplate.Config{LauncherImage: "example/virt-launcher:test", LauncherPullPolicy: corev1.PullIfNotPresent, UseEmulation: true, Overhead: podtemplate.DefaultOverhead(), LauncherUID: launcherv1.LauncherUID},
		Namespace:          ns,
		HeartbeatThreshold: 3 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	cacheOpts := controllers.CacheOptions(o)
	cacheOpts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: controllers.DefaultConcurrentReconciles},
	})
	require.NoError(t, err)
	require.NoError(t, controllers.AddToManager(mgr, o))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	return stop
}

// eventually waits for cond to hold, failing the test with msg after the timeout.
func eventually(t testing.TB, msg string, cond func() bool) {
	t.Helper()
	require.Eventuallyf(t, cond, wait, 50*time.Millisecond, "timed out waiting: %s", msg)
}

func get[T client.Object](t testing.TB, obj T, ns, name string) (T, bool) {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil {
		return obj, false
	}
	return obj, true
}

func newVM(ns, name string, strategy virtv1.VirtualMachineRunStrategy) *virtv1.VirtualMachine {
	return &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(strategy),
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: virtv1.VirtualMachineInstanceSpec{
					Domain: virtv1.DomainSpec{
						Resources: virtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
						Devices:   virtv1.Devices{Disks: []virtv1.Disk{{Name: "root"}}},
					},
					Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "example/disk:1"}}}},
				},
			},
		},
	}
}

package localcluster

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podvirt/podvirt/internal/ociimage"
)

// BuildPauseImage builds the sandbox image into the image cache and returns the tarball's path.
func BuildPauseImage(ctx context.Context, c Config) (string, error) { return c.buildPauseImage(ctx) }

// SyncImages imports the tarballs whose images containerd does not have at the same digest, then
// restarts the Deployments, DaemonSets and StatefulSets whose pods use a changed image. Unchanged
// images are left alone, so nothing restarts needlessly.
func SyncImages(ctx context.Context, c Config, files []string, out io.Writer) error {
	var changed []string
	for _, n := range c.existingNodes() {
		stale, err := c.syncNodeImages(ctx, n, files, out)
		if err != nil {
			return err
		}
		changed = append(changed, stale...)
	}
	if len(changed) == 0 {
		fmt.Fprintln(out, "images up to date")
		return nil
	}
	cs, err := c.clientset()
	if err != nil {
		return err
	}
	return restartWorkloadsUsing(ctx, cs, changed, out)
}

// syncNodeImages imports into a node's containerd the tarballs whose images it lacks at the same
// digest and returns those images' names.
func (c Config) syncNodeImages(ctx context.Context, n node, files []string, out io.Writer) ([]string, error) {
	have, err := containerdImages(ctx, n.containerdSocket())
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	var changed []string
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f] {
			continue
		}
		seen[f] = true
		imgs, err := ociimage.TarballImages(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		var stale []string
		for name, d := range imgs {
			if have[name] != d {
				stale = append(stale, name)
			}
		}
		if len(stale) == 0 {
			continue
		}
		if err := ociimage.Import(ctx, "ctr", n.containerdSocket(), []string{f}, io.Discard); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
		sort.Strings(stale)
		fmt.Fprintf(out, "%s: imported %s (%s)\n", n.name, f, strings.Join(stale, ", "))
		changed = append(changed, stale...)
	}
	return changed, nil
}

// containerdImages maps image names to manifest digests in the k8s.io namespace of the containerd
// at socket.
func containerdImages(ctx context.Context, socket string) (map[string]string, error) {
	outText, err := run(ctx, "ctr", "-n", ociimage.ContainerdNamespace, "--address", socket, "images", "ls")
	if err != nil {
		return nil, fmt.Errorf("list containerd images (is the local cluster up?): %w", err)
	}
	images := map[string]string{}
	for _, line := range splitLines(outText)[1:] {
		if f := strings.Fields(line); len(f) >= 3 {
			images[f[0]] = f[2]
		}
	}
	return images, nil
}

// restartWorkloadsUsing triggers a rollout of every workload whose pod template uses one of images.
func restartWorkloadsUsing(ctx context.Context, cs kubernetes.Interface, images []string, out io.Writer) error {
	want := map[string]bool{}
	for _, i := range images {
		want[i] = true
	}
	uses := func(spec corev1.PodSpec) bool {
		for _, ct := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			if n, err := ociimage.NormalizeName(ct.Image); err == nil && want[n] {
				return true
			}
		}
		return false
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"podvirt.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano)))
	apps := cs.AppsV1()
	deps, err := apps.Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	dss, err := apps.DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list daemonsets: %w", err)
	}
	sss, err := apps.StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	type restart struct {
		kind, ns, name string
		do             func() error
	}
	var todo []restart
	for _, d := range deps.Items {
		if uses(d.Spec.Template.Spec) {
			todo = append(todo, restart{"deployment", d.Namespace, d.Name, func() error {
				_, err := apps.Deployments(d.Namespace).Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				return err
			}})
		}
	}
	for _, d := range dss.Items {
		if uses(d.Spec.Template.Spec) {
			todo = append(todo, restart{"daemonset", d.Namespace, d.Name, func() error {
				_, err := apps.DaemonSets(d.Namespace).Patch(ctx, d.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				return err
			}})
		}
	}
	for _, s := range sss.Items {
		if uses(s.Spec.Template.Spec) {
			todo = append(todo, restart{"statefulset", s.Namespace, s.Name, func() error {
				_, err := apps.StatefulSets(s.Namespace).Patch(ctx, s.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				return err
			}})
		}
	}
	for _, r := range todo {
		if err := r.do(); err != nil {
			return fmt.Errorf("restart %s %s/%s: %w", r.kind, r.ns, r.name, err)
		}
		fmt.Fprintf(out, "restarted %s %s/%s\n", r.kind, r.ns, r.name)
	}
	return nil
}

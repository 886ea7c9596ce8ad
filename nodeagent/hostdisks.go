package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/atomicfile"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// HostDisks keeps the node's hostDisk images (launcherv1.HostDiskRoot, mounted at Dir): Prepare gives
// a launcher its images, and Start removes a namespace's images once the namespace is gone. Each
// namespace's directory records the UID of the namespace it serves (launcherv1.HostDiskNamespaceUIDFile, root's, in a
// directory only root writes), so a later namespace of the same name starts without the images of
// the one before it.
type HostDisks struct {
	Dir string
	// Reader reads Namespaces (uncached).
	Reader client.Reader
	// Interval is the time between sweeps for the directories of deleted namespaces.
	Interval time.Duration
	// Budget bounds each namespace's images on this node (zero: DefaultHostDiskBudget).
	Budget HostDiskBudget

	mu sync.Mutex // one claim or sweep at a time
}

// HostDiskBudget bounds one namespace's hostDisk images on one node: a DiskOrCreate that would go
// past it is refused naming the budget. Bytes counts the images' sizes, which are sparse: what
// their guests may write into them, not what they hold yet.
type HostDiskBudget struct {
	Bytes  int64
	Images int
}

// DefaultHostDiskBudget is the node agent's budget unless --host-disk-namespace-budget says
// otherwise: 1 TiB (admission's largest single disk) in at most 256 images.
var DefaultHostDiskBudget = HostDiskBudget{Bytes: 1 << 40, Images: 256}

func (b HostDiskBudget) orDefault() HostDiskBudget {
	if b.Bytes <= 0 {
		b.Bytes = DefaultHostDiskBudget.Bytes
	}
	if b.Images <= 0 {
		b.Images = DefaultHostDiskBudget.Images
	}
	return b
}

// hostDiskSweepInterval is how often the agent looks for the images of deleted namespaces.
const hostDiskSweepInterval = 5 * time.Minute

// NeedLeaderElection is false: every agent keeps its own node's images.
func (h *HostDisks) NeedLeaderElection() bool { return false }

// Start sweeps at once and then every Interval until ctx ends.
func (h *HostDisks) Start(ctx context.Context) error {
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	for {
		h.Sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep removes the directory of every namespace that no longer exists, and the images in one whose
// namespace was deleted and created again; errors are logged (the next sweep tries again).
func (h *HostDisks) Sweep(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("host-disks")
	entries, err := os.ReadDir(h.Dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Listing hostDisk directories")
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || len(validation.IsDNS1123Label(name)) > 0 {
			continue // not a namespace's directory: never Podvirt's to remove
		}
		if err := h.sweep(ctx, name); err != nil {
			logger.Error(err, "Keeping the hostDisk images of namespaces", "namespace", name)
		}
	}
}

// sweep removes namespace's images if it is gone, or those of an earlier namespace of its name. It
// reads the namespace again under the lock (which Prepare holds while it claims a directory), so a
// namespace created again meanwhile keeps its directory.
func (h *HostDisks) sweep(ctx context.Context, name string) error {
	ns := &corev1.Namespace{}
	err := h.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read namespace: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		return h.claim(name, string(ns.UID))
	}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: name}, ns); !apierrors.IsNotFound(err) {
		return err // created again (nil), or unknown: kept
	}
	if err := os.RemoveAll(filepath.Join(h.Dir, name)); err != nil {
		return fmt.Errorf("remove the images of a deleted namespace: %w", err)
	}
	log.FromContext(ctx).WithName("host-disks").Info("Removed the hostDisk images of a deleted namespace", "namespace", name)
	return nil
}

// Prepare gives the launcher of vmi (running in pod) each of its hostDisk images, in the directory of
// vmi's namespace as it is now.
func (h *HostDisks) Prepare(ctx context.Context, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod) error {
	if !hasHostDisk(vmi) {
		return nil
	}
	if h == nil || h.Dir == "" {
		return &hostDiskError{"spec.volumes: this node agent keeps no hostDisk images (--host-disk-dir)"}
	}
	ns := &corev1.Namespace{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: vmi.Namespace}, ns); err != nil {
		return fmt.Errorf("hostDisk images: namespace %s: %w", vmi.Namespace, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.claim(vmi.Namespace, string(ns.UID)); err != nil {
		return err
	}
	return prepareHostDisks(h.Dir, vmi, pod, h.Budget)
}

func hasHostDisk(vmi *virtv1.VirtualMachineInstance) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.HostDisk != nil {
			return true
		}
	}
	return false
}

// claim makes Dir/namespace the directory of the namespace with uid. One without a record (made
// before records were kept, or by the kubelet for a launcher Pod's mount) is adopted; one recorded
// for another UID held a deleted namespace's images, which are removed (its directories stay: a
// running launcher Pod may have one mounted).
func (h *HostDisks) claim(namespace, uid string) error {
	dir := filepath.Join(h.Dir, namespace)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("hostDisk images: %w", err)
		}
	case err != nil:
		return fmt.Errorf("hostDisk images: %w", err)
	case !fi.IsDir():
		return &hostDiskError{fmt.Sprintf("hostDisk images: %s is not a directory on the node", launcherv1.HostDiskDir(namespace))}
	default:
		recorded, err := launcherclient.ReadBeneath(dir, launcherv1.HostDiskNamespaceUIDFile, 128)
		switch {
		case err == nil && string(recorded) == uid:
			return nil
		case err == nil:
			if err := removeFiles(dir); err != nil {
				return fmt.Errorf("hostDisk images of a deleted namespace %s: %w", namespace, err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("hostDisk images: %w", err)
		}
	}
	return atomicfile.WriteFile(filepath.Join(dir, launcherv1.HostDiskNamespaceUIDFile), []byte(uid), 0o644)
}

// removeFiles removes everything under dir but its directories (never following a link).
func removeFiles(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Remove(p)
	})
}

// hostDiskError is a hostDisk the agent cannot provide; the instance fails naming the field.
type hostDiskError struct{ msg string }

func (e *hostDiskError) Error() string { return e.msg }

// prepareHostDisks gives the launcher each hostDisk image of vmi: DiskOrCreate creates a sparse
// image of its capacity when there is none, Disk must exist; either way the regular file (never a
// symlink or a directory, and reached through no symlink) is handed to the launcher's user. dir is
// the node's launcherv1.HostDiskRoot as the agent sees it; the launcher's user is the one its Pod
// runs as. An image is created only within the namespace's budget (callers hold HostDisks.mu, so
// two creations never both fit in the same room).
func prepareHostDisks(dir string, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod, budget HostDiskBudget) error {
	owner := launcherUser(pod)
	budget = budget.orDefault()
	var created []string
	for i, v := range vmi.Spec.Volumes {
		hd := v.HostDisk
		if hd == nil {
			continue
		}
		field := fmt.Sprintf("spec.volumes[%d].hostDisk", i)
		rel, ok := strings.CutPrefix(hd.Path, launcherv1.HostDiskRoot+"/")
		if !ok || !launcherv1.InHostDiskDir(vmi.Namespace, hd.Path) {
			return &hostDiskError{fmt.Sprintf("%s.path: %q is not under %s", field, hd.Path, launcherv1.HostDiskDir(vmi.Namespace))}
		}
		for _, part := range strings.Split(rel, "/") {
			if strings.HasPrefix(part, ".podvirt-") {
				return &hostDiskError{fmt.Sprintf("%s.path: %q: names starting with .podvirt- are the node agent's", field, hd.Path)}
			}
		}
		made, err := provideImage(dir, rel, hd, field, owner, budget)
		if made != "" {
			created = append(created, made)
		}
		if err != nil {
			for _, f := range created { // an instance refused leaves none of its new images behind
				_ = os.Remove(f)
			}
			return err
		}
	}
	return nil
}

// provideImage makes dir/rel a regular file owned by the launcher's user; it returns the file's
// path when it created it.
func provideImage(dir, rel string, hd *virtv1.HostDisk, field string, owner user, budget HostDiskBudget) (created string, _ error) {
	parts := strings.Split(rel, "/")
	cur := dir
	for _, p := range parts[:len(parts)-1] { // the directories: created, never followed as symlinks
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return created, fmt.Errorf("%s.path: create %s: %w", field, cur, err)
			}
		case err != nil:
			return created, fmt.Errorf("%s.path: %w", field, err)
		case !fi.IsDir():
			return created, &hostDiskError{fmt.Sprintf("%s.path: %s is not a directory on the node", field, filepath.Dir(hd.Path))}
		}
	}
	file := filepath.Join(dir, rel)
	flags := os.O_RDWR | syscall.O_NOFOLLOW
	if hd.Type == virtv1.HostDiskExistsOrCreate {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(file, flags, 0o660)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return created, &hostDiskError{fmt.Sprintf("%s.path: %s does not exist on the node (type Disk; DiskOrCreate creates it)", field, hd.Path)}
	case err != nil:
		return created, &hostDiskError{fmt.Sprintf("%s.path: %s cannot be used: %v", field, hd.Path, err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return created, fmt.Errorf("%s.path: %w", field, err)
	}
	if !fi.Mode().IsRegular() {
		return created, &hostDiskError{fmt.Sprintf("%s.path: %s is not a regular file on the node", field, hd.Path)}
	}
	if fi.Size() == 0 && hd.Type == virtv1.HostDiskExistsOrCreate {
		if err := withinBudget(filepath.Join(dir, parts[0]), hd.Capacity.Value(), field, budget); err != nil {
			_ = os.Remove(file)
			return "", err
		}
		created = file
		if err := f.Truncate(hd.Capacity.Value()); err != nil {
			_ = os.Remove(file)
			return "", &hostDiskError{fmt.Sprintf("%s.capacity: cannot make a %s image: %v", field, hd.Capacity.String(), err)}
		}
	}
	if err := f.Chown(owner.uid, owner.gid); err != nil {
		return created, fmt.Errorf("%s.path: give %s to the launcher: %w", field, hd.Path, err)
	}
	return created, nil
}

// withinBudget checks that an image of size bytes more fits the budget of the namespace whose
// directory is nsDir (the new image, still empty, is already in it).
func withinBudget(nsDir string, size int64, field string, budget HostDiskBudget) error {
	var used int64
	images := 0
	err := filepath.WalkDir(nsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == launcherv1.HostDiskNamespaceUIDFile || p == nsDir || !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		images++ // directories count too: each costs a walk
		if images > budget.Images {
			return fs.SkipAll // enough to refuse
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		used = min(used+max(fi.Size(), 0), math.MaxInt64/2) // saturated: images a launcher grew cannot wrap the sum
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: measure the namespace's hostDisk images: %w", field, err)
	}
	ns := filepath.Base(nsDir)
	switch {
	case images > budget.Images:
		return &hostDiskError{fmt.Sprintf("%s.path: namespace %s already has %d hostDisk images and directories on this node, the node agent's limit (--host-disk-namespace-images)", field, ns, budget.Images)}
	case size > budget.Bytes-used:
		return &hostDiskError{fmt.Sprintf("%s.capacity: %s more would bring namespace %s's hostDisk images on this node to %s, beyond the node agent's budget of %s per namespace (--host-disk-namespace-budget)",
			field, quantity(size), ns, quantity(used+size), quantity(budget.Bytes))}
	}
	return nil
}

// quantity shows bytes as Kubernetes does (binary suffixes).
func quantity(bytes int64) string { return resource.NewQuantity(bytes, resource.BinarySI).String() }

// user is a numeric user and group.
type user struct{ uid, gid int }

// launcherUser is the user and group the launcher Pod's containers run as (the controller renders
// them from its --launcher-uid), launcherv1.LauncherUID when the Pod does not say.
func launcherUser(pod *corev1.Pod) user {
	u := user{launcherv1.LauncherUID, launcherv1.LauncherUID}
	if pod == nil || pod.Spec.SecurityContext == nil {
		return u
	}
	if sc := pod.Spec.SecurityContext; sc.RunAsUser != nil {
		u.uid = int(*sc.RunAsUser)
		u.gid = u.uid
		if sc.RunAsGroup != nil {
			u.gid = int(*sc.RunAsGroup)
		}
	}
	return u
}

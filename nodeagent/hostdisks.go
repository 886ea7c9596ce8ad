package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// hostDiskError is a hostDisk the agent cannot provide; the instance fails naming the field.
type hostDiskError struct{ msg string }

func (e *hostDiskError) Error() string { return e.msg }

// prepareHostDisks gives the launcher each hostDisk image of vmi: DiskOrCreate creates a sparse
// image of its capacity when there is none, Disk must exist; either way the regular file (never a
// symlink or a directory, and reached through no symlink) is handed to the launcher's user. dir is
// the node's launcherv1.HostDiskRoot as the agent sees it; the launcher's user is the one its Pod
// runs as.
func prepareHostDisks(dir string, vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod) error {
	owner := launcherUser(pod)
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
		if err := provideImage(dir, rel, hd, field, owner); err != nil {
			return err
		}
	}
	return nil
}

// provideImage makes dir/rel a regular file owned by the launcher's user.
func provideImage(dir, rel string, hd *virtv1.HostDisk, field string, owner user) error {
	parts := strings.Split(rel, "/")
	cur := dir
	for _, p := range parts[:len(parts)-1] { // the directories: created, never followed as symlinks
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s.path: create %s: %w", field, cur, err)
			}
		case err != nil:
			return fmt.Errorf("%s.path: %w", field, err)
		case !fi.IsDir():
			return &hostDiskError{fmt.Sprintf("%s.path: %s is not a directory on the node", field, filepath.Dir(hd.Path))}
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
		return &hostDiskError{fmt.Sprintf("%s.path: %s does not exist on the node (type Disk; DiskOrCreate creates it)", field, hd.Path)}
	case err != nil:
		return &hostDiskError{fmt.Sprintf("%s.path: %s cannot be used: %v", field, hd.Path, err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s.path: %w", field, err)
	}
	if !fi.Mode().IsRegular() {
		return &hostDiskError{fmt.Sprintf("%s.path: %s is not a regular file on the node", field, hd.Path)}
	}
	if fi.Size() == 0 && hd.Type == virtv1.HostDiskExistsOrCreate {
		if err := f.Truncate(hd.Capacity.Value()); err != nil {
			_ = os.Remove(file)
			return &hostDiskError{fmt.Sprintf("%s.capacity: cannot make a %s image: %v", field, hd.Capacity.String(), err)}
		}
	}
	if err := f.Chown(owner.uid, owner.gid); err != nil {
		return fmt.Errorf("%s.path: give %s to the launcher: %w", field, hd.Path, err)
	}
	return nil
}

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

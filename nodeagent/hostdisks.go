package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// hostDiskError is a hostDisk the agent cannot provide; the instance fails naming the field.
type hostDiskError struct{ msg string }

func (e *hostDiskError) Error() string { return e.msg }

// prepareHostDisks gives the launcher each hostDisk image of vmi: DiskOrCreate creates a sparse
// image of its capacity when there is none, Disk must exist; either way the file is handed to the
// launcher's user. dir is the node's launcherv1.HostDiskRoot as the agent sees it (admission keeps
// every hostDisk path below it).
func prepareHostDisks(dir string, vmi *virtv1.VirtualMachineInstance) error {
	for i, v := range vmi.Spec.Volumes {
		hd := v.HostDisk
		if hd == nil {
			continue
		}
		field := fmt.Sprintf("spec.volumes[%d].hostDisk.path", i)
		rel, ok := strings.CutPrefix(filepath.Clean(hd.Path), launcherv1.HostDiskRoot+"/")
		if !ok {
			return &hostDiskError{fmt.Sprintf("%s: %q is not under %s", field, hd.Path, launcherv1.HostDiskRoot)}
		}
		file := filepath.Join(dir, rel)
		_, err := os.Stat(file)
		switch {
		case errors.Is(err, fs.ErrNotExist) && hd.Type == virtv1.HostDiskExistsOrCreate:
			if err := createImage(file, hd.Capacity.Value()); err != nil {
				return fmt.Errorf("%s: create %s: %w", field, hd.Path, err)
			}
		case errors.Is(err, fs.ErrNotExist):
			return &hostDiskError{fmt.Sprintf("%s: %s does not exist on the node (type Disk; DiskOrCreate creates it)", field, hd.Path)}
		case err != nil:
			return fmt.Errorf("%s: %w", field, err)
		}
		if err := os.Chown(file, launcherv1.LauncherUID, launcherv1.LauncherUID); err != nil {
			return fmt.Errorf("%s: give %s to the launcher: %w", field, hd.Path, err)
		}
	}
	return nil
}

// createImage makes a sparse file of size bytes, and its directory.
func createImage(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o660)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

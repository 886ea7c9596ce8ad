package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// What the qemu guest agent in a guest reports, as KubeVirt's guestosinfo, userlist and
// filesystemlist subresources answer it (same field names).

// VirtualMachineInstanceGuestAgentInfo is the answer of the guestosinfo subresource.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceGuestAgentInfo struct {
	metav1.TypeMeta `json:",inline"`
	// GAVersion is the version of the guest agent.
	GAVersion string `json:"guestAgentVersion,omitempty"`
	// SupportedCommands are the commands the guest agent offers.
	// +listType=atomic
	SupportedCommands []GuestAgentCommandInfo `json:"supportedCommands,omitempty"`
	// Hostname is the guest's host name.
	Hostname string `json:"hostname,omitempty"`
	// OS is the guest's operating system.
	OS VirtualMachineInstanceGuestOSInfo `json:"os,omitempty"`
	// Timezone is the guest's time zone: "name, offset in seconds".
	Timezone string `json:"timezone,omitempty"`
	// UserList are the users logged in to the guest.
	UserList []VirtualMachineInstanceGuestOSUser `json:"userList,omitempty"`
	// FSInfo are the guest's mounted file systems.
	FSInfo VirtualMachineInstanceFileSystemInfo `json:"fsInfo,omitempty"`
	// FSFreezeStatus is "frozen" after a freeze was asked for and until the unfreeze.
	FSFreezeStatus string `json:"fsFreezeStatus,omitempty"`
}

// GuestAgentCommandInfo is one command of the guest agent.
type GuestAgentCommandInfo struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled,omitempty"`
}

// VirtualMachineInstanceGuestOSUserList is the answer of the userlist subresource.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceGuestOSUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceGuestOSUser `json:"items"`
}

// VirtualMachineInstanceGuestOSUser is a user logged in to the guest.
type VirtualMachineInstanceGuestOSUser struct {
	UserName string `json:"userName"`
	Domain   string `json:"domain,omitempty"`
	// LoginTime is the user's earliest login, in fractional seconds since the epoch.
	LoginTime float64 `json:"loginTime,omitempty"`
}

// VirtualMachineInstanceFileSystemInfo are the guest's file systems.
type VirtualMachineInstanceFileSystemInfo struct {
	Filesystems []VirtualMachineInstanceFileSystem `json:"disks"`
}

// VirtualMachineInstanceFileSystemList is the answer of the filesystemlist subresource.
//
// +kubebuilder:object:root=true
type VirtualMachineInstanceFileSystemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineInstanceFileSystem `json:"items"`
}

// VirtualMachineInstanceFileSystemDisk is a disk a guest file system lives on.
type VirtualMachineInstanceFileSystemDisk struct {
	Serial  string `json:"serial,omitempty"`
	BusType string `json:"busType"`
}

// VirtualMachineInstanceFileSystem is one mounted file system of the guest.
type VirtualMachineInstanceFileSystem struct {
	DiskName       string                                 `json:"diskName"`
	MountPoint     string                                 `json:"mountPoint"`
	FileSystemType string                                 `json:"fileSystemType"`
	UsedBytes      int                                    `json:"usedBytes"`
	TotalBytes     int                                    `json:"totalBytes"`
	Disk           []VirtualMachineInstanceFileSystemDisk `json:"disk,omitempty"`
}

// FreezeUnfreezeTimeout is the body of the freeze subresource: the guest's file systems are thawed
// by themselves after UnfreezeTimeout unless unfrozen before.
type FreezeUnfreezeTimeout struct {
	UnfreezeTimeout *metav1.Duration `json:"unfreezeTimeout"`
}

// FSFrozen is FSFreezeStatus while the guest's file systems are frozen.
const FSFrozen = "frozen"

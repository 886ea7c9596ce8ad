package v1

// +kubebuilder:object:generate=false

// UnsupportedKind is a kind of KubeVirt's API that Podvirt serves but does not implement: its
// CustomResourceDefinition lets clients list, watch and delete it (KubeVirt's tools and tests clean
// up every kind KubeVirt has), and virt-api's admission refuses to create one, naming the kind.
type UnsupportedKind struct {
	// Group, Kind, Plural and ShortNames are KubeVirt's.
	Group, Kind, Plural string
	ShortNames          []string
	// Versions are served in this order; the last is stored.
	Versions []string
	// Cluster is true for cluster-scoped kinds.
	Cluster bool
}

// UnsupportedKinds are every kind KubeVirt serves that Podvirt does not implement (make generate
// writes their CRDs into install/crds/unsupported.yaml; webhooks.yaml matches them).
var UnsupportedKinds = []UnsupportedKind{
	{Group: GroupName, Kind: "VirtualMachineInstancePreset", Plural: "virtualmachineinstancepresets", ShortNames: []string{"vmipreset", "vmipresets"}, Versions: []string{"v1alpha3", "v1"}},
	{Group: "pool.kubevirt.io", Kind: "VirtualMachinePool", Plural: "virtualmachinepools", ShortNames: []string{"vmpool", "vmpools"}, Versions: []string{"v1alpha1", "v1beta1"}},
	{Group: "snapshot.kubevirt.io", Kind: "VirtualMachineSnapshot", Plural: "virtualmachinesnapshots", ShortNames: []string{"vmsnapshot", "vmsnapshots"}, Versions: []string{"v1alpha1", "v1beta1"}},
	{Group: "snapshot.kubevirt.io", Kind: "VirtualMachineSnapshotContent", Plural: "virtualmachinesnapshotcontents", ShortNames: []string{"vmsnapshotcontent", "vmsnapshotcontents"}, Versions: []string{"v1alpha1", "v1beta1"}},
	{Group: "snapshot.kubevirt.io", Kind: "VirtualMachineRestore", Plural: "virtualmachinerestores", ShortNames: []string{"vmrestore", "vmrestores"}, Versions: []string{"v1alpha1", "v1beta1"}},
	{Group: "export.kubevirt.io", Kind: "VirtualMachineExport", Plural: "virtualmachineexports", ShortNames: []string{"vmexport", "vmexports"}, Versions: []string{"v1alpha1", "v1beta1", "v1"}},
	{Group: "clone.kubevirt.io", Kind: "VirtualMachineClone", Plural: "virtualmachineclones", ShortNames: []string{"vmclone", "vmclones"}, Versions: []string{"v1alpha1", "v1beta1"}},
	{Group: "backup.kubevirt.io", Kind: "VirtualMachineBackup", Plural: "virtualmachinebackups", ShortNames: []string{"vmbackup", "vmbackups"}, Versions: []string{"v1alpha1"}},
	{Group: "backup.kubevirt.io", Kind: "VirtualMachineBackupTracker", Plural: "virtualmachinebackuptrackers", ShortNames: []string{"vmbackuptracker", "vmbackuptrackers"}, Versions: []string{"v1alpha1"}},
	{Group: "migrations.kubevirt.io", Kind: "MigrationPolicy", Plural: "migrationpolicies", Versions: []string{"v1alpha1"}, Cluster: true},
}

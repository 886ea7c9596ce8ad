package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DataVolumeTemplateSpec is a CDI DataVolume a VirtualMachine creates and owns.
type DataVolumeTemplateSpec struct {
	// apiVersion and kind are accepted for compatibility and ignored.
	metav1.TypeMeta `json:",inline"`
	// +optional
	ObjectMeta metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the DataVolume's spec (CDI's cdi.kubevirt.io/v1beta1 DataVolumeSpec).
	Spec DataVolumeSpec `json:"spec"`
	// Status is accepted for compatibility and ignored.
	// +optional
	// +nullable
	Status *DataVolumeTemplateDummyStatus `json:"status,omitempty"`
}

// DataVolumeTemplateDummyStatus is an always-empty status kept for compatibility.
type DataVolumeTemplateDummyStatus struct{}

// DataVolumeSpec is the spec of a CDI DataVolume: where its data comes from and the PVC it fills.
type DataVolumeSpec struct {
	// Source of the data.
	// +optional
	Source *CDIDataVolumeSource `json:"source,omitempty"`
	// SourceRef points at the source indirectly (a DataSource).
	// +optional
	SourceRef *DataVolumeSourceRef `json:"sourceRef,omitempty"`
	// PVC is the claim to create, taken as is.
	// +optional
	PVC *corev1.PersistentVolumeClaimSpec `json:"pvc,omitempty"`
	// Storage is the claim to create, completed from the StorageProfile.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`
	// PriorityClassName of the importer, cloner and uploader Pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ContentType is kubevirt (a disk image, the default) or archive (a tar to unpack).
	// +optional
	// +kubebuilder:validation:Enum=kubevirt;archive
	ContentType DataVolumeContentType `json:"contentType,omitempty"`
	// Checkpoints are the stages of a multi-stage (warm) import.
	// +optional
	Checkpoints []DataVolumeCheckpoint `json:"checkpoints,omitempty"`
	// FinalCheckpoint says the last checkpoint is the final one.
	// +optional
	FinalCheckpoint bool `json:"finalCheckpoint,omitempty"`
	// Preallocation allocates the whole volume up front.
	// +optional
	Preallocation *bool `json:"preallocation,omitempty"`
}

// DataVolumeContentType is the kind of data imported into a DataVolume.
type DataVolumeContentType string

// DataVolume content types.
const (
	DataVolumeKubeVirt DataVolumeContentType = "kubevirt"
	DataVolumeArchive  DataVolumeContentType = "archive"
)

// StorageSpec is a claim request that CDI completes from the StorageProfile of the storage class.
type StorageSpec struct {
	// AccessModes of the claim.
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	// Selector of the volumes to bind to.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Resources is the requested size.
	// +optional
	Resources corev1.VolumeResourceRequirements `json:"resources,omitempty"`
	// VolumeName is the PersistentVolume to bind to.
	// +optional
	VolumeName string `json:"volumeName,omitempty"`
	// StorageClassName of the claim.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// VolumeMode of the claim (Filesystem, Block, or FromStorageProfile).
	// +optional
	VolumeMode *corev1.PersistentVolumeMode `json:"volumeMode,omitempty"`
	// DataSource populates the claim from a snapshot or another claim.
	// +optional
	DataSource *corev1.TypedLocalObjectReference `json:"dataSource,omitempty"`
	// DataSourceRef populates the claim from any supported object.
	// +optional
	DataSourceRef *corev1.TypedObjectReference `json:"dataSourceRef,omitempty"`
}

// DataVolumeCheckpoint is a stage of a multi-stage import.
type DataVolumeCheckpoint struct {
	// Previous is the snapshot of the previous stage.
	Previous string `json:"previous"`
	// Current is the snapshot of this stage.
	Current string `json:"current"`
}

// CDIDataVolumeSource is where a DataVolume's data comes from; exactly one field is set.
type CDIDataVolumeSource struct {
	// HTTP imports from an http(s) URL.
	// +optional
	HTTP *DataVolumeSourceHTTP `json:"http,omitempty"`
	// S3 imports from an S3 bucket.
	// +optional
	S3 *DataVolumeSourceS3 `json:"s3,omitempty"`
	// GCS imports from Google Cloud Storage.
	// +optional
	GCS *DataVolumeSourceGCS `json:"gcs,omitempty"`
	// Registry imports a container disk image.
	// +optional
	Registry *DataVolumeSourceRegistry `json:"registry,omitempty"`
	// PVC clones an existing claim.
	// +optional
	PVC *DataVolumeSourcePVC `json:"pvc,omitempty"`
	// Upload waits for data sent through the upload proxy.
	// +optional
	Upload *DataVolumeSourceUpload `json:"upload,omitempty"`
	// Blank creates an empty raw image.
	// +optional
	Blank *DataVolumeBlankImage `json:"blank,omitempty"`
	// Imageio imports a disk from oVirt.
	// +optional
	Imageio *DataVolumeSourceImageIO `json:"imageio,omitempty"`
	// VDDK imports a disk from VMware.
	// +optional
	VDDK *DataVolumeSourceVDDK `json:"vddk,omitempty"`
	// Snapshot restores a VolumeSnapshot.
	// +optional
	Snapshot *DataVolumeSourceSnapshot `json:"snapshot,omitempty"`
}

// DataVolumeSourceHTTP imports from an http(s) URL.
type DataVolumeSourceHTTP struct {
	// URL to download.
	URL string `json:"url"`
	// SecretRef names a Secret with accessKeyId and secretKey for basic auth.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
	// CertConfigMap names a ConfigMap with the CA to trust.
	// +optional
	CertConfigMap string `json:"certConfigMap,omitempty"`
	// ExtraHeaders are added to the requests.
	// +optional
	ExtraHeaders []string `json:"extraHeaders,omitempty"`
	// SecretExtraHeaders name Secrets holding headers to add.
	// +optional
	SecretExtraHeaders []string `json:"secretExtraHeaders,omitempty"`
}

// DataVolumeSourceS3 imports from an S3 bucket.
type DataVolumeSourceS3 struct {
	// URL of the object.
	URL string `json:"url"`
	// SecretRef names a Secret with the credentials.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
	// CertConfigMap names a ConfigMap with the CA to trust.
	// +optional
	CertConfigMap string `json:"certConfigMap,omitempty"`
}

// DataVolumeSourceGCS imports from Google Cloud Storage.
type DataVolumeSourceGCS struct {
	// URL of the object.
	URL string `json:"url"`
	// SecretRef names a Secret with the credentials.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
}

// RegistryPullMethod is how a registry image is pulled: pod or node.
type RegistryPullMethod string

// Registry pull methods.
const (
	RegistryPullPod  RegistryPullMethod = "pod"
	RegistryPullNode RegistryPullMethod = "node"
)

// DataVolumeSourceRegistry imports a disk image from a container registry.
type DataVolumeSourceRegistry struct {
	// URL of the image (docker:// or oci-archive://).
	// +optional
	URL *string `json:"url,omitempty"`
	// ImageStream to import from.
	// +optional
	ImageStream *string `json:"imageStream,omitempty"`
	// PullMethod is pod (the default) or node.
	// +optional
	PullMethod *RegistryPullMethod `json:"pullMethod,omitempty"`
	// SecretRef names a Secret with registry credentials.
	// +optional
	SecretRef *string `json:"secretRef,omitempty"`
	// CertConfigMap names a ConfigMap with the registry's CA.
	// +optional
	CertConfigMap *string `json:"certConfigMap,omitempty"`
	// Platform selects the image variant.
	// +optional
	Platform *RegistryPlatformOptions `json:"platform,omitempty"`
}

// RegistryPlatformOptions selects an image variant.
type RegistryPlatformOptions struct {
	// Architecture of the image.
	// +optional
	Architecture string `json:"architecture,omitempty"`
}

// DataVolumeSourcePVC clones an existing claim.
type DataVolumeSourcePVC struct {
	// Namespace of the claim.
	Namespace string `json:"namespace"`
	// Name of the claim.
	Name string `json:"name"`
}

// DataVolumeSourceSnapshot restores a VolumeSnapshot.
type DataVolumeSourceSnapshot struct {
	// Namespace of the snapshot.
	Namespace string `json:"namespace"`
	// Name of the snapshot.
	Name string `json:"name"`
}

// DataVolumeSourceUpload waits for an upload; it has no settings.
type DataVolumeSourceUpload struct{}

// DataVolumeBlankImage creates an empty raw image; it has no settings.
type DataVolumeBlankImage struct{}

// DataVolumeSourceImageIO imports a disk from oVirt.
type DataVolumeSourceImageIO struct {
	// URL of the oVirt engine.
	URL string `json:"url"`
	// DiskID of the disk to import.
	DiskID string `json:"diskId"`
	// SecretRef names a Secret with the credentials.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
	// CertConfigMap names a ConfigMap with the CA to trust.
	// +optional
	CertConfigMap string `json:"certConfigMap,omitempty"`
	// InsecureSkipVerify skips certificate checks.
	// +optional
	InsecureSkipVerify *bool `json:"insecureSkipVerify,omitempty"`
}

// DataVolumeSourceVDDK imports a disk from VMware.
type DataVolumeSourceVDDK struct {
	// URL of the vCenter or ESXi host.
	// +optional
	URL string `json:"url,omitempty"`
	// UUID of the virtual machine.
	// +optional
	UUID string `json:"uuid,omitempty"`
	// BackingFile is the disk's path on the host.
	// +optional
	BackingFile string `json:"backingFile,omitempty"`
	// Thumbprint of the host's certificate.
	// +optional
	Thumbprint string `json:"thumbprint,omitempty"`
	// SecretRef names a Secret with the credentials.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
	// InitImageURL is an image with the VDDK library.
	// +optional
	InitImageURL string `json:"initImageURL,omitempty"`
	// ExtraArgs names a ConfigMap with extra VDDK arguments.
	// +optional
	ExtraArgs string `json:"extraArgs,omitempty"`
}

// DataVolumeSourceRef points at the source of a DataVolume indirectly.
type DataVolumeSourceRef struct {
	// Kind of the referenced object; CDI supports DataSource.
	Kind string `json:"kind"`
	// Namespace of the object; defaults to the DataVolume's.
	// +optional
	Namespace *string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

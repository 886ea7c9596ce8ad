package podtemplate

import (
	"strings"

	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Config is what the launcher Pod depends on besides the instance.
type Config struct {
	// LauncherImage runs the compute and guest-console-log containers.
	LauncherImage string
	// LauncherPullPolicy of LauncherImage.
	LauncherPullPolicy corev1.PullPolicy
	// UseEmulation runs guests under software emulation: no /dev/kvm is requested, and the memory
	// overhead includes the emulator's translation cache.
	UseEmulation bool
	// Overhead is the memory the launcher Pod needs beyond the guest's memory (see overhead.go).
	Overhead Overhead
	// LauncherUID is the non-root user the launcher runs as.
	LauncherUID int64
	// Storage bounds the node disk the Pod may use; DefaultStorage when zero.
	Storage Storage
	// DiskImagePullPolicy, when set, is the pull policy of containerDisk and kernelBoot images that
	// do not name one. Kubernetes' default (Always for :latest) needs a registry; a cluster whose
	// images are imported locally sets IfNotPresent.
	DiskImagePullPolicy corev1.PullPolicy
}

// podGraceMargin is added to the guest's grace period for the Pod, so the launcher can power the
// guest off (and kill it after its grace period) before the kubelet kills the launcher.
const podGraceMargin = 15

// PodName is the launcher Pod's name: deterministic, so a restarted controller never creates a
// second Pod for the same instance (the apiserver refuses the duplicate name).
func PodName(vmi *virtv1.VirtualMachineInstance) string {
	return podName(vmi.Name, string(vmi.UID))
}

// TargetPodName is the name of the launcher Pod a migration moves the instance to: deterministic
// for the migration, like PodName.
func TargetPodName(vmi *virtv1.VirtualMachineInstance, migrationUID string) string {
	return podName(vmi.Name, string(vmi.UID)+"/"+migrationUID)
}

// podName is virt-launcher-<name>-<5 hex of key's hash>, the name cut to fit 63 characters.
func podName(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	suffix := hex.EncodeToString(sum[:])[:5]
	const max = 63
	if room := max - len(PodNamePrefix) - 1 - len(suffix); len(name) > room {
		name = name[:room]
	}
	return PodNamePrefix + name + "-" + suffix
}

// PodNamePrefix starts every launcher Pod's name (KubeVirt's): the eviction webhook's match condition
// (install/virt-api/webhooks.yaml) selects launcher Pods by it.
const PodNamePrefix = "virt-launcher-"

// PersistentStateClaim names the claim that keeps an instance's state across restarts (a persistent
// TPM's, persistent EFI variables): KubeVirt's name. A VM's instances share their VM's name, so each start finds it again.
func PersistentStateClaim(vmi *virtv1.VirtualMachineInstance) string {
	return virtv1.PersistentStateClaimName(vmi.Name)
}

// RenderPod is the launcher Pod of vmi: the compute container (launcher, libvirt, qemu), one container
// per container disk, the console log's; or an error naming the field of a spec it cannot run.
func RenderPod(vmi *virtv1.VirtualMachineInstance, cfg Config) (*corev1.Pod, error) {
	if errs := vmi.Spec.NameErrors(field.NewPath("spec")); len(errs) > 0 { // names become mount paths
		return nil, errs.ToAggregate()
	}
	guest, err := vmi.Spec.Domain.GuestMemory()
	if err != nil {
		return nil, err
	}
	resources, err := computeResources(vmi, guest, cfg)
	if err != nil {
		return nil, err
	}
	for i, v := range vmi.Spec.Volumes { // admission refuses these first; never mount another namespace's
		if v.HostDisk != nil && !launcherv1.InHostDiskDir(vmi.Namespace, v.HostDisk.Path) {
			return nil, fmt.Errorf("spec.volumes[%d].hostDisk.path: %q is not under %s", i, v.HostDisk.Path, launcherv1.HostDiskDir(vmi.Namespace))
		}
	}
	storage := cfg.Storage
	if storage == (Storage{}) {
		storage = DefaultStorage()
	}
	private := storage.For(vmi)
	addStorage(&resources, &private)
	volumes, computeMounts := podVolumes(vmi, private)
	disks := diskContainers(vmi, cfg)
	compute := computeContainer(vmi, cfg, resources, computeMounts)
	if len(disks) > 0 {
		installHelper(&compute)
	}
	containers := append([]corev1.Container{compute}, disks...)
	if log := vmi.Spec.Domain.Devices.LogSerialConsole; log == nil || *log {
		containers = append(containers, consoleLogContainer(cfg))
	}
	if guaranteed(compute.Resources) { // the Pod is Guaranteed only if every container is
		for i := range containers[1:] {
			guaranteeHelper(&containers[1+i].Resources)
		}
	}
	networks, err := multusAnnotation(vmi)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(vmi),
			Namespace:       vmi.Namespace,
			Labels:          podLabels(vmi),
			Annotations:     podAnnotations(vmi),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, virtv1.SchemeGroupVersion.WithKind("VirtualMachineInstance"))},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(vmi.Spec.GracePeriodSeconds() + podGraceMargin),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Hostname:                      podHostname(vmi),
			Subdomain:                     vmi.Spec.Subdomain,
			NodeSelector:                  vmi.Spec.NodeSelector,
			Affinity:                      vmi.Spec.Affinity,
			Tolerations:                   vmi.Spec.Tolerations,
			TopologySpreadConstraints:     vmi.Spec.TopologySpreadConstraints,
			SchedulerName:                 vmi.Spec.SchedulerName,
			PriorityClassName:             vmi.Spec.PriorityClassName,
			DNSPolicy:                     vmi.Spec.DNSPolicy,
			DNSConfig:                     vmi.Spec.DNSConfig,
			SecurityContext:               podSecurity(cfg),
			ImagePullSecrets:              pullSecrets(vmi),
			ServiceAccountName:            serviceAccount(vmi),
			Containers:                    containers,
			Volumes:                       volumes,
		},
	}
	if networks != "" {
		pod.Annotations[MultusNetworksAnnotation] = networks
	}
	return pod, nil
}

// podAnnotations: the instance's annotations that KubeVirt's users put there for the launcher Pod
// (podAnnotationCarried), plus kubectl's default container. KubeVirt carries nearly all of them; on a
// cluster shared by tenants who may create instances but not Pods, an annotation is a lever on
// whatever acts on Pods (runtimes, CNI plugins and IPAM, mesh injectors, backup hooks, node
// tooling), so only these are carried.
func podAnnotations(vmi *virtv1.VirtualMachineInstance) map[string]string {
	out := map[string]string{}
	for k, v := range vmi.Annotations {
		if podAnnotationCarried(k) {
			out[k] = v
		}
	}
	out["kubectl.kubernetes.io/default-container"] = launcherv1.ComputeContainer
	return out
}

// podAnnotationCarried: a key without a domain and without dots (the user's own), or one of
// kubevirt.io/ or kubernetes.io/ but the kubelet's config.* (mirror Pods). Not carried, though
// KubeVirt carries them: mesh injection switches (a tenant could opt out of a sidecar the operator
// requires, or into one), scrape settings of the cluster's Prometheus, and every other domain.
func podAnnotationCarried(key string) bool {
	domain, name, ok := strings.Cut(key, "/")
	switch {
	case !ok:
		return !strings.Contains(key, ".")
	case domain == "kubevirt.io":
		return true
	case domain == "kubernetes.io":
		return !strings.HasPrefix(name, "config.")
	}
	return false
}

// podLabels: the instance's own labels plus the ones KubeVirt's launcher Pods carry, which
// Services select on (`virtctl expose`: vmi.kubevirt.io/id).
func podLabels(vmi *virtv1.VirtualMachineInstance) map[string]string {
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[launcherv1.AppLabel] = launcherv1.AppLabelValue
	labels[launcherv1.DomainLabel] = vmi.Name
	labels[launcherv1.CreatedByLabel] = string(vmi.UID)
	labels[launcherv1.InstanceIDLabel] = vmi.Name
	labels[launcherv1.VMNameLabel] = vmi.Name
	return labels
}

// podHostname is spec.hostname, else the instance's name cut to a DNS label's 63 characters.
func podHostname(vmi *virtv1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	if len(vmi.Name) > 63 {
		return vmi.Name[:63]
	}
	return vmi.Name
}

// Mounts every launcher container has.
var (
	privateMount = corev1.VolumeMount{Name: launcherv1.PrivateVolume, MountPath: launcherv1.PrivateDir}
	binMount     = corev1.VolumeMount{Name: launcherv1.BinVolume, MountPath: launcherv1.BinDir}
)

// kubeletTokenVolume is the token with which the launcher asks virt-api for its node's kubelet lease
// (launcherv1.KubeletLeasePath): the Pod's ServiceAccount's, for launcherv1.KubeletLeaseAudience only.
func kubeletTokenVolume() corev1.Volume {
	return corev1.Volume{Name: launcherv1.KubeletTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: launcherv1.KubeletLeaseAudience, ExpirationSeconds: ptr.To(int64(launcherv1.KubeletTokenSeconds)), Path: launcherv1.KubeletTokenFile,
		}}},
	}}}
}

// kubeletTokenMount is where the compute container finds it.
var kubeletTokenMount = corev1.VolumeMount{Name: launcherv1.KubeletTokenVolume, MountPath: launcherv1.KubeletTokenDir, ReadOnly: true}

// podVolumes: the private emptyDir (of at most private bytes) and the bin one, one secret volume per Secret the cloud-init volumes
// and accessCredentials name, one volume per PVC, config disk or host disk directory, huge pages, the persistent state
// claim; and the compute container's mounts of them.
func podVolumes(vmi *virtv1.VirtualMachineInstance, private resource.Quantity) ([]corev1.Volume, []corev1.VolumeMount) {
	mounts := []corev1.VolumeMount{privateMount, kubeletTokenMount}
	volumes := []corev1.Volume{
		{Name: launcherv1.PrivateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &private}}},
		{Name: launcherv1.BinVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(binStorage.DeepCopy())}}},
		kubeletTokenVolume(),
	}
	mounted := map[string]bool{} // secrets already mounted
	for i, v := range vmi.Spec.Volumes {
		switch {
		case v.CloudInitNoCloud != nil || v.CloudInitConfigDrive != nil:
			refs := []*corev1.LocalObjectReference{}
			if ci := v.CloudInitNoCloud; ci != nil {
				refs = append(refs, ci.SecretRef, ci.NetworkDataSecretRef)
			}
			if cd := v.CloudInitConfigDrive; cd != nil {
				refs = append(refs, cd.SecretRef, cd.NetworkDataSecretRef)
			}
			for _, ref := range refs {
				if ref == nil || mounted[ref.Name] {
					continue
				}
				mounted[ref.Name] = true
				volName := fmt.Sprintf("secret%d-%d", i, len(mounted))
				volumes = append(volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ref.Name}}})
				mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(launcherv1.SecretMountRoot, ref.Name), ReadOnly: true})
			}
		case v.ConfigMap != nil || v.Secret != nil || v.ServiceAccount != nil || v.DownwardAPI != nil:
			volName := fmt.Sprintf("volume%d-config", i)
			volumes = append(volumes, corev1.Volume{Name: volName, VolumeSource: configDiskSource(&v)})
			mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(launcherv1.ConfigDiskMountRoot, v.Name), ReadOnly: true})
		case v.HostDisk != nil:
			volName := fmt.Sprintf("volume%d-hostdisk", i)
			volumes = append(volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path.Dir(path.Clean(v.HostDisk.Path)), Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
			}})
			mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(launcherv1.HostDiskMountRoot, v.Name)})
		default:
			claim, readOnly, ok := v.Claim()
			if !ok {
				continue
			}
			volName := fmt.Sprintf("volume%d-pvc", i)
			volumes = append(volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly},
			}})
			mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(launcherv1.PVCMountRoot, v.Name), ReadOnly: readOnly})
		}
	}
	// The Secrets of accessCredentials, where the launcher reads them (kubelet keeps them current).
	for i := range vmi.Spec.AccessCredentials {
		name := vmi.Spec.AccessCredentials[i].SecretName()
		if name == "" || mounted[name] {
			continue
		}
		mounted[name] = true
		volName := fmt.Sprintf("credential%d", i)
		volumes = append(volumes, corev1.Volume{Name: volName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}})
		mounts = append(mounts, corev1.VolumeMount{Name: volName, MountPath: path.Join(launcherv1.SecretMountRoot, name), ReadOnly: true})
	}
	if m := vmi.Spec.Domain.Memory; m != nil && m.Hugepages != nil {
		volumes = append(volumes, corev1.Volume{Name: launcherv1.HugepagesVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(string(corev1.StorageMediumHugePagesPrefix) + m.Hugepages.PageSize)},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: launcherv1.HugepagesVolume, MountPath: launcherv1.HugepagesDir})
	}
	if vmi.Spec.PersistentState() {
		volumes = append(volumes, corev1.Volume{Name: launcherv1.PersistentStateVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PersistentStateClaim(vmi)},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: launcherv1.PersistentStateVolume, MountPath: launcherv1.PersistentStateDir})
	}
	return volumes, mounts
}

// installHelper makes the compute container (the first container) install the static
// container-disk helper into the bin volume in its postStart hook, so that the disk containers can
// run it in images that have no binaries at all. The kubelet starts a Pod's containers in order and
// the next only once the previous one's postStart hook has returned, so the helper is there when
// the disk containers start — without an init container, whose exit the kubelet would only notice
// at its next relist (up to a second on every start).
func installHelper(c *corev1.Container) {
	c.VolumeMounts = append(c.VolumeMounts, binMount)
	c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{launcherv1.ContainerDiskBinary, "install", launcherv1.BinDir}},
	}}
}

// diskContainers copy the files out of their images into the private directory while the launcher
// starts (regular containers, not init containers: nothing waits on the kubelet noticing one end):
// one per containerDisk volume, one for the kernelBoot kernel and initrd. The launcher waits
// for the files before it starts the guest; the images themselves are never modified.
func diskContainers(vmi *virtv1.VirtualMachineInstance, cfg Config) []corev1.Container {
	var out []corev1.Container
	for i, v := range vmi.Spec.Volumes {
		if v.ContainerDisk == nil {
			continue
		}
		src := v.ContainerDisk.Path
		if src == "" {
			src = "/disk"
		}
		dst := path.Join(launcherv1.PrivateDir, launcherv1.DisksDir, v.Name)
		out = append(out, diskContainer(cfg, fmt.Sprintf("volume%d-containerdisk", i), v.ContainerDisk.Image, v.ContainerDisk.ImagePullPolicy, src, dst))
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil {
		c := fw.KernelBoot.Container
		dst := path.Join(launcherv1.PrivateDir, launcherv1.KernelBootDir)
		var pairs []string
		if c.KernelPath != "" {
			pairs = append(pairs, c.KernelPath, path.Join(dst, launcherv1.KernelBootKernel))
		}
		if c.InitrdPath != "" {
			pairs = append(pairs, c.InitrdPath, path.Join(dst, launcherv1.KernelBootInitrd))
		}
		if len(pairs) > 0 {
			out = append(out, diskContainer(cfg, "kernel-boot", c.Image, c.ImagePullPolicy, pairs...))
		}
	}
	return out
}

// diskContainer runs the container-disk helper from the bin volume in image: it copies each SRC
// DST pair, then stays until the launcher ends (a running container keeps the Pod Ready).
func diskContainer(cfg Config, name, image string, policy corev1.PullPolicy, pairs ...string) corev1.Container {
	if policy == "" {
		policy = cfg.DiskImagePullPolicy
	}
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: policy,
		Command:         append([]string{path.Join(launcherv1.BinDir, path.Base(launcherv1.ContainerDiskBinary)), "serve", launcherv1.PrivateDir}, pairs...),
		VolumeMounts:    []corev1.VolumeMount{binMount, privateMount},
		Resources:       helperResources(),
		SecurityContext: containerSecurity(),
	}
}

// computeContainer runs the launcher (libvirt + qemu) with the guest's resources.
func computeContainer(vmi *virtv1.VirtualMachineInstance, cfg Config, resources corev1.ResourceRequirements, mounts []corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            launcherv1.ComputeContainer,
		Image:           cfg.LauncherImage,
		ImagePullPolicy: cfg.LauncherPullPolicy,
		Command:         []string{"virt-launcher", "run", "--vmi-name", vmi.Name, "--namespace", vmi.Namespace},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Resources:       resources,
		VolumeMounts:    mounts,
		SecurityContext: containerSecurity(),
		ReadinessProbe:  podProbe(vmi.Spec.ReadinessProbe),
		LivenessProbe:   podProbe(vmi.Spec.LivenessProbe),
	}
}

// podProbe is the compute container's probe for an instance's httpGet probe (as KubeVirt does it):
// the kubelet reaches the guest through the port the launcher forwards from the Pod's address. The
// Pod's readiness becomes the instance's (and the VM's); a failed liveness probe makes the kubelet
// stop the launcher, which shuts the guest down and fails the instance (launcherv1.ReasonTerminated).
func podProbe(p *virtv1.Probe) *corev1.Probe {
	if p == nil || p.HTTPGet == nil {
		return nil
	}
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: p.HTTPGet.DeepCopy()},
		InitialDelaySeconds: p.InitialDelaySeconds,
		TimeoutSeconds:      p.TimeoutSeconds,
		PeriodSeconds:       p.PeriodSeconds,
		SuccessThreshold:    p.SuccessThreshold,
		FailureThreshold:    p.FailureThreshold,
	}
}

// consoleLogContainer streams the guest's serial log to its stdout (`kubectl logs`).
func consoleLogContainer(cfg Config) corev1.Container {
	return corev1.Container{
		Name:            launcherv1.ConsoleLogContainer,
		Image:           cfg.LauncherImage,
		ImagePullPolicy: cfg.LauncherPullPolicy,
		Command:         []string{"virt-launcher", "console-log"},
		Resources:       helperResources(),
		VolumeMounts:    []corev1.VolumeMount{privateMount},
		SecurityContext: containerSecurity(),
	}
}

// configDiskSource is the Pod volume whose files a configMap, secret, serviceAccount or downwardAPI
// volume presents to the guest (the launcher makes an ISO disk of them). A ServiceAccount's are
// its token (the Pod runs as it), the cluster's CA and the namespace, as a Pod would see them.
func configDiskSource(v *virtv1.Volume) corev1.VolumeSource {
	switch {
	case v.ConfigMap != nil:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference, Optional: v.ConfigMap.Optional}}
	case v.Secret != nil:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Optional: v.Secret.Optional}}
	case v.DownwardAPI != nil:
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: v.DownwardAPI.Fields}}
	}
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(serviceAccountTokenSeconds))}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
	}}}
}

// serviceAccount is the ServiceAccount a serviceAccount volume names (the launcher Pod runs as it),
// else the namespace's default one, named: a Pod's projected token (kubeletTokenVolume) must name
// its ServiceAccount, which the ServiceAccount admission plugin does only where it runs.
func serviceAccount(vmi *virtv1.VirtualMachineInstance) string {
	for _, v := range vmi.Spec.Volumes {
		if v.ServiceAccount != nil {
			return v.ServiceAccount.ServiceAccountName
		}
	}
	return "default"
}

// pullSecrets are the Secrets the containerDisk and kernelBoot images name, each once.
func pullSecrets(vmi *virtv1.VirtualMachineInstance) []corev1.LocalObjectReference {
	var names []string
	for _, v := range vmi.Spec.Volumes {
		if v.ContainerDisk != nil && v.ContainerDisk.ImagePullSecret != "" {
			names = append(names, v.ContainerDisk.ImagePullSecret)
		}
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.KernelBoot != nil && fw.KernelBoot.Container != nil && fw.KernelBoot.Container.ImagePullSecret != "" {
		names = append(names, fw.KernelBoot.Container.ImagePullSecret)
	}
	var refs []corev1.LocalObjectReference
	for _, n := range names {
		if !slices.Contains(refs, corev1.LocalObjectReference{Name: n}) {
			refs = append(refs, corev1.LocalObjectReference{Name: n})
		}
	}
	return refs
}

// addDeviceRequests asks for one of each GPU's and host device's deviceName (a device plugin's
// podSecurity: the launcher runs as a non-root user; the sysctl lets it forward guest ports
// below 1024 on the Pod's address without any capability.
func podSecurity(cfg Config) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(cfg.LauncherUID),
		RunAsGroup:     ptr.To(cfg.LauncherUID),
		FSGroup:        ptr.To(cfg.LauncherUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		Sysctls:        []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
	}
}

// containerSecurity: unprivileged, no capabilities, no privilege escalation.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

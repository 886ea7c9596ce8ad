package apiserver

import (
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	instancetypev1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Dependency types of an object graph's nodes (virtv1.DependencyTypeLabel), KubeVirt's.
const (
	dependencyStorage = "storage"
	dependencyCompute = "compute"
	dependencyConfig  = "config"
	dependencyNetwork = "network"
)

// objectGraph answers the objects a VM or an instance owns or uses, as KubeVirt's objectgraph
// subresource: the instance and its launcher Pod, instancetype and preference with their revisions,
// the claims, DataVolumes, ConfigMaps, Secrets and ServiceAccounts of its volumes and credentials,
// and its network attachments. What the spec names is taken from the spec (nothing else is read but
// the VM, the instance and the launcher Pod), so the graph shows what a missing object would break.
func (h *Handlers) objectGraph(w http.ResponseWriter, r *http.Request) {
	ctx, key := r.Context(), types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	var opts virtv1.ObjectGraphOptions // KubeVirt's client sends them as the GET's body
	if err := readBody(r, &opts); err != nil {
		writeError(w, r, err)
		return
	}
	var root virtv1.ObjectGraphNode
	if strings.Contains(r.Pattern, "/"+subv1.VirtualMachines+"/{name}/") { // the route, not the path: a namespace may be called anything
		vm := &virtv1.VirtualMachine{}
		if err := h.Client.Get(ctx, key, vm); err != nil {
			writeError(w, r, err)
			return
		}
		root = h.vmGraph(r, vm)
	} else {
		vmi := &virtv1.VirtualMachineInstance{}
		if err := h.Client.Get(ctx, key, vmi); err != nil {
			writeError(w, r, err)
			return
		}
		root = h.vmiGraph(r, vmi)
	}
	selector := labels.Everything()
	if opts.LabelSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(opts.LabelSelector); err != nil {
			writeError(w, r, apierrors.NewBadRequest("labelSelector: "+err.Error()))
			return
		}
	}
	root.Children = filterGraph(root.Children, ptr.Deref(opts.IncludeOptionalNodes, true), selector)
	responsewriters.WriteRawJSON(http.StatusOK, root, w)
}

// filterGraph keeps the nodes the options keep; a node that goes takes its children with it.
func filterGraph(nodes []virtv1.ObjectGraphNode, optional bool, selector labels.Selector) []virtv1.ObjectGraphNode {
	var out []virtv1.ObjectGraphNode
	for _, n := range nodes {
		if (!optional && ptr.Deref(n.Optional, false)) || !selector.Matches(labels.Set(n.Labels)) {
			continue
		}
		n.Children = filterGraph(n.Children, optional, selector)
		out = append(out, n)
	}
	return out
}

// graphNode is one node: the object's group, kind, name and namespace ("" for a cluster-scoped one).
func graphNode(group, kind, name, namespace, dependency string, optional bool, children ...virtv1.ObjectGraphNode) virtv1.ObjectGraphNode {
	n := virtv1.ObjectGraphNode{ // the group and namespace even when "" (core, cluster-scoped), as KubeVirt
		ObjectReference: corev1.TypedObjectReference{APIGroup: ptr.To(group), Kind: kind, Name: name, Namespace: ptr.To(namespace)},
		Labels:          map[string]string{virtv1.DependencyTypeLabel: dependency},
		Children:        children,
	}
	if optional {
		n.Optional = ptr.To(true)
	}
	return n
}

// vmGraph: the VM, its running instance (with its Pod), instancetype and preference (each with the
// revision the VM uses), and what its template uses.
func (h *Handlers) vmGraph(r *http.Request, vm *virtv1.VirtualMachine) virtv1.ObjectGraphNode {
	ns := vm.Namespace
	root := graphNode(virtv1.GroupName, "VirtualMachine", vm.Name, ns, dependencyCompute, false)
	if vm.Status.Created {
		vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: ns}}
		if err := h.Client.Get(r.Context(), client.ObjectKeyFromObject(vmi), vmi); err == nil {
			root.Children = append(root.Children, graphNode(virtv1.GroupName, "VirtualMachineInstance", vm.Name, ns, dependencyCompute, false, h.podNodes(r, vmi)...))
		}
	}
	// matcher adds an instancetype or preference (the cluster kind unless the namespaced one is
	// named) and the revision the VM runs with (status, else the matcher's revisionName).
	matcher := func(kind, clusterKind, namespacedKind, name string, ref *virtv1.InstancetypeStatusRef, revision string) {
		if name == "" {
			return
		}
		scope := ""
		if kind != "" && !strings.EqualFold(kind, clusterKind) {
			kind, scope = namespacedKind, ns
		} else {
			kind = clusterKind
		}
		root.Children = append(root.Children, graphNode(instancetypev1beta1.GroupName, kind, name, scope, dependencyConfig, true))
		if ref != nil && ref.ControllerRevisionRef != nil && ref.ControllerRevisionRef.Name != "" {
			revision = ref.ControllerRevisionRef.Name
		}
		if revision != "" { // what the VM runs with: not optional, as KubeVirt
			root.Children = append(root.Children, graphNode("apps", "ControllerRevision", revision, ns, dependencyConfig, false))
		}
	}
	if it := vm.Spec.Instancetype; it != nil {
		matcher(it.Kind, instancetypev1beta1.KindClusterInstancetype, instancetypev1beta1.KindInstancetype, it.Name, vm.Status.InstancetypeRef, it.RevisionName)
	}
	if p := vm.Spec.Preference; p != nil {
		matcher(p.Kind, instancetypev1beta1.KindClusterPreference, instancetypev1beta1.KindPreference, p.Name, vm.Status.PreferenceRef, p.RevisionName)
	}
	if t := vm.Spec.Template; t != nil {
		root.Children = append(root.Children, specNodes(&t.Spec, vm.Name, ns)...)
	}
	return root
}

// vmiGraph: the instance, its Pod, and what its spec uses.
func (h *Handlers) vmiGraph(r *http.Request, vmi *virtv1.VirtualMachineInstance) virtv1.ObjectGraphNode {
	root := graphNode(virtv1.GroupName, "VirtualMachineInstance", vmi.Name, vmi.Namespace, dependencyCompute, false, h.podNodes(r, vmi)...)
	root.Children = append(root.Children, specNodes(&vmi.Spec, vmi.Name, vmi.Namespace)...)
	return root
}

// podNodes is the instance's launcher Pod (status.launcherPod; only one that carries the instance's
// uid: a name is not proof), if any.
func (h *Handlers) podNodes(r *http.Request, vmi *virtv1.VirtualMachineInstance) []virtv1.ObjectGraphNode {
	if vmi.Status.LauncherPod == "" {
		return nil
	}
	pod := &corev1.Pod{}
	if err := h.Client.Get(r.Context(), client.ObjectKey{Namespace: vmi.Namespace, Name: vmi.Status.LauncherPod}, pod); err != nil ||
		pod.Labels[launcherv1.CreatedByLabel] != string(vmi.UID) {
		return nil
	}
	return []virtv1.ObjectGraphNode{graphNode("", "Pod", pod.Name, pod.Namespace, dependencyCompute, false)}
}

// specNodes are the objects an instance spec names: access credential Secrets, its volumes' sources
// (a DataVolume with the claim named after it; cloud-init Secrets), the claim keeping its persistent
// state, and its Multus networks' attachments (optional). owner names the VM or standalone instance.
func specNodes(spec *virtv1.VirtualMachineInstanceSpec, owner, ns string) []virtv1.ObjectGraphNode {
	var out []virtv1.ObjectGraphNode
	secret := func(name string) {
		if name != "" {
			out = append(out, graphNode("", "Secret", name, ns, dependencyConfig, false))
		}
	}
	for i := range spec.AccessCredentials {
		secret(spec.AccessCredentials[i].SecretName())
	}
	for _, v := range spec.Volumes {
		switch {
		case v.DataVolume != nil:
			out = append(out, graphNode("cdi.kubevirt.io", "DataVolume", v.DataVolume.Name, ns, dependencyStorage, false,
				graphNode("", "PersistentVolumeClaim", v.DataVolume.Name, ns, dependencyStorage, false)))
		case v.PersistentVolumeClaim != nil:
			out = append(out, graphNode("", "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName, ns, dependencyStorage, false))
		case v.ConfigMap != nil:
			out = append(out, graphNode("", "ConfigMap", v.ConfigMap.Name, ns, dependencyConfig, false))
		case v.Secret != nil:
			secret(v.Secret.SecretName)
		case v.ServiceAccount != nil:
			out = append(out, graphNode("", "ServiceAccount", v.ServiceAccount.ServiceAccountName, ns, dependencyConfig, false))
		case v.CloudInitNoCloud != nil:
			for _, ref := range []*corev1.LocalObjectReference{v.CloudInitNoCloud.SecretRef, v.CloudInitNoCloud.NetworkDataSecretRef} {
				if ref != nil {
					secret(ref.Name)
				}
			}
		case v.CloudInitConfigDrive != nil:
			for _, ref := range []*corev1.LocalObjectReference{v.CloudInitConfigDrive.SecretRef, v.CloudInitConfigDrive.NetworkDataSecretRef} {
				if ref != nil {
					secret(ref.Name)
				}
			}
		}
	}
	if spec.PersistentState() {
		out = append(out, graphNode("", "PersistentVolumeClaim", virtv1.PersistentStateClaimName(owner), ns, dependencyStorage, false))
	}
	for _, n := range spec.Networks {
		if n.Multus == nil {
			continue
		}
		nadNS, name := ns, n.Multus.NetworkName
		if before, after, ok := strings.Cut(name, "/"); ok {
			nadNS, name = before, after
		}
		out = append(out, graphNode("k8s.cni.cncf.io", "NetworkAttachmentDefinition", name, nadNS, dependencyNetwork, true))
	}
	return out
}

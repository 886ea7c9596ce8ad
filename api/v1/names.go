package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameErrors checks every name of the spec that becomes part of a path or a device name on the node
// (volumes, disks, interfaces, networks: DNS-1123 labels, as the CRD's pattern says; the Secrets
// cloud-init and accessCredentials read: DNS-1123 subdomains, as Kubernetes names them), naming each field that breaks the
// rule. Admission refuses such a spec; the launcher Pod's and the domain's renderers refuse it again,
// so a name that slipped past admission (an old object, a changed CRD) never leaves its directory.
func (s *VirtualMachineInstanceSpec) NameErrors(fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(p *field.Path, name string) {
		for _, msg := range validation.IsDNS1123Label(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
	}
	subdomain := func(p *field.Path, name string) {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
	}
	secret := func(p *field.Path, ref *corev1.LocalObjectReference) {
		if ref != nil {
			subdomain(p.Child("name"), ref.Name)
		}
	}
	for i, v := range s.Volumes {
		p := fld.Child("volumes").Index(i)
		label(p.Child("name"), v.Name)
		if ci := v.CloudInitNoCloud; ci != nil {
			secret(p.Child("cloudInitNoCloud", "secretRef"), ci.SecretRef)
			secret(p.Child("cloudInitNoCloud", "networkDataSecretRef"), ci.NetworkDataSecretRef)
		}
		if cd := v.CloudInitConfigDrive; cd != nil {
			secret(p.Child("cloudInitConfigDrive", "secretRef"), cd.SecretRef)
			secret(p.Child("cloudInitConfigDrive", "networkDataSecretRef"), cd.NetworkDataSecretRef)
		}
	}
	for i := range s.AccessCredentials {
		c := &s.AccessCredentials[i]
		if name := c.SecretName(); name != "" {
			kind := "sshPublicKey"
			if c.UserPassword != nil {
				kind = "userPassword"
			}
			subdomain(fld.Child("accessCredentials").Index(i).Child(kind, "source", "secret", "secretName"), name)
		}
	}
	for i, d := range s.Domain.Devices.Disks {
		label(fld.Child("domain", "devices", "disks").Index(i).Child("name"), d.Name)
	}
	for i, n := range s.Domain.Devices.Interfaces {
		label(fld.Child("domain", "devices", "interfaces").Index(i).Child("name"), n.Name)
	}
	for i, n := range s.Networks {
		label(fld.Child("networks").Index(i).Child("name"), n.Name)
	}
	return errs
}

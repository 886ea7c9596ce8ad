// Package cloudinit builds cloud-init seeds as ISO9660 images (package isoimage): NoCloud (labelled
// "cidata": user-data, meta-data with instance-id and local-hostname, network-config when given) and
// ConfigDrive (labelled "config-2": openstack/latest/user_data, meta_data.json, network_data.json).
package cloudinit

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/credentials"
	"github.com/podvirt/podvirt/nodeagent/launcher/isoimage"
)

// VolumeLabel is the label cloud-init's NoCloud datasource looks for.
const VolumeLabel = "cidata"

// File names in the seed.
const (
	UserDataFile      = "user-data"
	MetaDataFile      = "meta-data"
	NetworkConfigFile = "network-config"
)

// Seed is the content of a NoCloud seed.
type Seed struct {
	// InstanceID identifies the instance to cloud-init; per-instance modules run again when it changes.
	InstanceID string
	// Hostname is meta-data's local-hostname.
	Hostname string
	// UserData is the user-data file (may be empty).
	UserData []byte
	// NetworkData is the network-config file; nil means no file.
	NetworkData []byte
	// PublicKeys are the SSH public keys of the accessCredentials propagated through this seed
	// (meta-data public-keys, meta_data.json public_keys): cloud-init gives them to the default user.
	PublicKeys []string
}

// SeedFor is the seed of the cloudInitNoCloud (or cloudInitConfigDrive) volume named volume in vmi. The instance-id is
// "<name>.<namespace>" (stable across restarts, as KubeVirt does) and the hostname is spec.hostname or
// the VMI's name. secrets resolves secretRef and networkDataSecretRef; it may be nil when none is used.
func SeedFor(vmi *virtv1.VirtualMachineInstance, volume string, secrets credentials.SecretLookup) (Seed, error) {
	var src *virtv1.CloudInitNoCloudSource
	configDrive := false
	field := fmt.Sprintf("spec.volumes[name=%s].cloudInitNoCloud", volume)
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		switch {
		case v.Name != volume:
		case v.CloudInitNoCloud != nil:
			src = v.CloudInitNoCloud
		case v.CloudInitConfigDrive != nil:
			// The same data in another layout (WriteConfigDrive).
			cd := v.CloudInitConfigDrive
			src = &virtv1.CloudInitNoCloudSource{UserData: cd.UserData, UserDataBase64: cd.UserDataBase64, SecretRef: cd.SecretRef,
				NetworkData: cd.NetworkData, NetworkDataBase64: cd.NetworkDataBase64, NetworkDataSecretRef: cd.NetworkDataSecretRef}
			field = fmt.Sprintf("spec.volumes[name=%s].cloudInitConfigDrive", volume)
			configDrive = true
		}
	}
	if src == nil {
		return Seed{}, fmt.Errorf("%s: not set", field)
	}
	seed := Seed{InstanceID: vmi.Name + "." + vmi.Namespace, Hostname: vmi.Spec.Hostname}
	if seed.Hostname == "" {
		seed.Hostname = vmi.Name
	}
	var err error
	seed.UserData, err = pick(field, "userData", src.UserData, src.UserDataBase64, src.SecretRef, secrets, "userdata", "userData")
	if err != nil {
		return Seed{}, err
	}
	seed.NetworkData, err = pick(field, "networkData", src.NetworkData, src.NetworkDataBase64, src.NetworkDataSecretRef, secrets, "networkdata", "networkData")
	if err != nil {
		return Seed{}, err
	}
	if len(vmi.Spec.AccessCredentials) > 0 {
		if secrets == nil {
			return Seed{}, errors.New("spec.accessCredentials: the launcher has no Secrets to read")
		}
		if seed.PublicKeys, err = credentials.CloudInitKeys(vmi.Spec.AccessCredentials, configDrive, secrets); err != nil {
			return Seed{}, fmt.Errorf("spec.accessCredentials: %w", err)
		}
	}
	return seed, nil
}

// pick returns the one of text, base64 or secret that is set (nil when none is).
func pick(field, name, text, b64 string, ref *corev1.LocalObjectReference, secrets credentials.SecretLookup, keys ...string) ([]byte, error) {
	switch {
	case text != "":
		return []byte(text), nil
	case b64 != "":
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("%s.%sBase64: %w", field, name, err)
		}
		return data, nil
	case ref != nil && ref.Name != "":
		if secrets == nil {
			return nil, fmt.Errorf("%s.%sSecretRef: secret %s is not available to the launcher", field, name, ref.Name)
		}
		data, err := secrets(ref.Name)
		if err != nil {
			return nil, fmt.Errorf("%s.%sSecretRef: %w", field, name, err)
		}
		for _, k := range keys {
			if v, ok := data[k]; ok {
				return v, nil
			}
		}
		return nil, fmt.Errorf("%s.%sSecretRef: secret %s has no key %q", field, name, ref.Name, keys[0])
	}
	return nil, nil
}

// MetaData is the meta-data file of seed. The keys are written as a JSON list (JSON is YAML), so no
// key's text can add lines of its own.
func (s Seed) MetaData() []byte {
	md := fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", s.InstanceID, s.Hostname)
	if len(s.PublicKeys) > 0 {
		keys, _ := json.Marshal(s.PublicKeys) // []string always encodes
		md += "public-keys: " + string(keys) + "\n"
	}
	return []byte(md)
}

// ConfigDriveLabel is the label cloud-init's ConfigDrive datasource looks for.
const ConfigDriveLabel = "config-2"

// WriteConfigDrive writes seed as an OpenStack config drive to path (replacing it):
// openstack/latest/meta_data.json, user_data and, when given, network_data.json.
func WriteConfigDrive(path string, seed Seed) error {
	if seed.InstanceID == "" {
		return errors.New("seed: instance-id is empty")
	}
	md := map[string]any{"uuid": seed.InstanceID, "hostname": seed.Hostname, "name": seed.Hostname}
	if len(seed.PublicKeys) > 0 {
		keys := map[string]string{}
		for i, k := range seed.PublicKeys {
			keys[strconv.Itoa(i)] = k
		}
		md["public_keys"] = keys
	}
	meta, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("encode meta_data.json: %w", err)
	}
	const dir = "openstack/latest/"
	files := []isoimage.File{{Name: dir + "meta_data.json", Data: meta}, {Name: dir + "user_data", Data: seed.UserData}}
	if seed.NetworkData != nil {
		files = append(files, isoimage.File{Name: dir + "network_data.json", Data: seed.NetworkData})
	}
	return isoimage.Write(path, ConfigDriveLabel, files)
}

// WriteISO writes seed as a NoCloud ISO to path (replacing it).
func WriteISO(path string, seed Seed) error {
	if seed.InstanceID == "" {
		return errors.New("seed: instance-id is empty")
	}
	files := []isoimage.File{{Name: UserDataFile, Data: seed.UserData}, {Name: MetaDataFile, Data: seed.MetaData()}}
	if seed.NetworkData != nil {
		files = append(files, isoimage.File{Name: NetworkConfigFile, Data: seed.NetworkData})
	}
	return isoimage.Write(path, VolumeLabel, files)
}

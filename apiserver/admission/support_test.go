package admission

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

var update = flag.Bool("update", false, "rewrite the generated table in docs/api.md")

// fieldPaths lists every JSON field path of t (intermediate ones included, "[]" after lists) and
// says which are leaves: fields of other packages' types, maps, scalars and empty structs.
func fieldPaths(t reflect.Type, prefix string, paths map[string]bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || !sf.IsExported() {
			continue
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if opts == "inline" || sf.Anonymous && name == "" {
			fieldPaths(ft, prefix, paths)
			continue
		}
		path, list := prefix+name, false
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			ft = ft.Elem()
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			path, list = path+"[]", true
		}
		ours := ft.PkgPath() == reflect.TypeFor[virtv1.VirtualMachine]().PkgPath()
		leaf := !ours || ft.Kind() != reflect.Struct || ft.NumField() == 0
		paths[path] = leaf
		if list {
			paths[prefix+name] = leaf // a family may name the whole list
		}
		if !leaf {
			fieldPaths(ft, path+".", paths)
		}
	}
}

// covers says whether family's path is path or above it; its last name may name a whole list.
func covers(family, path string) bool {
	f, p := strings.Split(family, "."), strings.Split(path, ".")
	if len(f) > len(p) {
		return false
	}
	for i := range f {
		if f[i] != p[i] && (i < len(f)-1 || f[i]+"[]" != p[i]) {
			return false
		}
	}
	return true
}

func checkCoverage(t *testing.T, root reflect.Type, families []Family, skip ...string) {
	paths := map[string]bool{}
	fieldPaths(root, "", paths)
	for path, leaf := range paths {
		if !leaf || slices.ContainsFunc(skip, func(s string) bool { return covers(s, path) }) {
			continue
		}
		assert.True(t, slices.ContainsFunc(families, func(f Family) bool { return covers(f.Path, path) }),
			"%s.%s is in no family: say what Podvirt does with it", root.Name(), path)
	}
	for _, f := range families {
		_, ok := paths[f.Path]
		assert.True(t, ok, "family %q names no field of %s", f.Path, root.Name())
	}
}

// Every field of the API is implemented, explained or refused: none is silently ignored.
func TestFamiliesCoverEveryField(t *testing.T) {
	checkCoverage(t, reflect.TypeFor[virtv1.VirtualMachineInstanceSpec](), InstanceFamilies)
	checkCoverage(t, reflect.TypeFor[virtv1.VirtualMachineSpec](), VMFamilies, "template")
}

func TestUnsupportedNamesTheField(t *testing.T) {
	s := spec()
	s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, virtv1.Interface{Name: "b", Bridge: &virtv1.InterfaceBridge{}},
		virtv1.Interface{Name: "m", Bridge: &virtv1.InterfaceBridge{}}, // a bridge on a Multus network is stored
		virtv1.Interface{Name: "q", Masquerade: &virtv1.InterfaceMasquerade{}},
		virtv1.Interface{Name: "p", Bridge: &virtv1.InterfaceBridge{}, Ports: []virtv1.Port{{Port: 22}}})
	s.Networks = append(s.Networks, virtv1.Network{Name: "b", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}},
		virtv1.Network{Name: "m", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "vlan"}}},
		virtv1.Network{Name: "q", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "ns/vlan"}}},
		virtv1.Network{Name: "p", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "vlan"}}},
		virtv1.Network{Name: "z", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "a/b/c"}}})
	s.Domain.Devices.Disks = []virtv1.Disk{{Name: "a"}, {Name: "n", IO: virtv1.IONative}}
	s.Domain.Devices.AutoattachVSOCK = ptr.To(true)
	s.EvictionStrategy = ptr.To(virtv1.EvictionStrategyExternal)
	errs := ValidateInstanceSpec(&s, "ns", Policy{}, field.NewPath("spec"))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	assert.ElementsMatch(t, []string{
		`spec.domain.devices.disks[1].io: Invalid value: "native": not supported by Podvirt: needs O_DIRECT storage; use threads`,
		`spec.domain.devices.autoattachVSOCK: Invalid value: true: not supported by Podvirt: needs vhost-vsock on the node`,
		`spec.domain.devices.interfaces[1].bridge: Forbidden: not supported by Podvirt: the Pod network is user-mode here; use masquerade`,
		`spec.domain.devices.interfaces[3].bridge: Required value: a Multus network is joined with the bridge binding in Podvirt`,
		`spec.domain.devices.interfaces[4].ports: Forbidden: a bridged guest is reached at its own address: nothing is forwarded`,
		`spec.domain.devices.interfaces: Required value: an interface named "z" for the Multus network spec.networks[4]`,
		`spec.networks[4].multus.networkName: Invalid value: "a/b/c": NAME or NAMESPACE/NAME of a NetworkAttachmentDefinition`,
		`spec.evictionStrategy: Forbidden: External is refused: this cluster does not allow it (virt-api --allow-external-eviction), as a drain would wait with no bound for a controller to move the guest`,
	}, got)
	assert.Empty(t, ValidateInstanceSpec(&virtv1.VirtualMachineInstanceSpec{Domain: s.Domain, EvictionStrategy: s.EvictionStrategy}, "ns",
		Policy{ExternalEviction: true}, field.NewPath("spec")).Filter(func(e error) bool { return !strings.Contains(e.Error(), "evictionStrategy") }),
		"allowed by policy")

	s = spec()
	s.EvictionStrategy = ptr.To(virtv1.EvictionStrategy("LiveMigrateIfPossible"))
	s.Domain.Devices.AutoattachVSOCK = ptr.To(false)
	s.Domain.Devices.Disks = []virtv1.Disk{{Name: "t", IO: virtv1.IOThreads}}
	assert.Empty(t, ValidateInstanceSpec(&s, "ns", Policy{}, field.NewPath("spec")), "a value the family does not list is accepted")
}

func TestUnsupportedAnnotationNamed(t *testing.T) {
	errs := UnsupportedAnnotations(map[string]string{"hooks.kubevirt.io/hookSidecars": "[]", "other": "x"}, field.NewPath("metadata", "annotations"))
	require.Len(t, errs, 1)
	assert.Equal(t, "metadata.annotations[hooks.kubevirt.io/hookSidecars]: Forbidden: not supported by Podvirt: sidecar hooks", errs[0].Error())
}

const (
	tableBegin = "<!-- BEGIN generated by apiserver/admission TestDocsAPITable -update -->\n"
	tableEnd   = "<!-- END generated -->\n"
)

func renderFamilies(b *strings.Builder, prefix string, families []Family) {
	for _, f := range families {
		name := "`" + prefix + strings.ReplaceAll(f.Path, "[]", "[*]") + "`"
		if len(f.Values) > 0 {
			name += " = " + strings.Join(f.Values, ", ")
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", name, f.Support, f.Note)
	}
}

// docs/api.md's table of field families is the table admission enforces.
func TestDocsAPITable(t *testing.T) {
	var b strings.Builder
	b.WriteString(tableBegin)
	b.WriteString("| field (of a VirtualMachine's spec) | Podvirt | note |\n|---|---|---|\n")
	renderFamilies(&b, "spec.", VMFamilies)
	b.WriteString("\n| field (of a VirtualMachineInstance's spec; in a VM or replica set under `spec.template.spec`) | Podvirt | note |\n|---|---|---|\n")
	renderFamilies(&b, "spec.", InstanceFamilies)
	b.WriteString("\n| annotation (of an instance, or a template's metadata) | Podvirt | note |\n|---|---|---|\n")
	renderFamilies(&b, "", AnnotationFamilies)
	b.WriteString(tableEnd)

	const doc = "../../docs/api.md"
	raw, err := os.ReadFile(doc)
	require.NoError(t, err)
	before, rest, ok := strings.Cut(string(raw), tableBegin)
	require.True(t, ok, "%s has no %q", doc, tableBegin)
	_, after, ok := strings.Cut(rest, tableEnd)
	require.True(t, ok, "%s has no %q", doc, tableEnd)
	want := before + b.String() + after
	if *update {
		require.NoError(t, os.WriteFile(doc, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, string(raw), "docs/api.md is out of date: go test ./apiserver/admission -run TestDocsAPITable -update")
}

// Every webhook path admission serves is configured in the installed manifests.
func TestWebhookPathsInstalled(t *testing.T) {
	raw, err := os.ReadFile("../../install/virt-api/webhooks.yaml")
	require.NoError(t, err)
	for _, p := range []string{PathValidateVMI, PathMutateVMI, PathValidateVM, PathValidateReplicaSet, PathValidateMigration, PathMutateMigration} {
		assert.Contains(t, string(raw), "path: "+p+"\n")
	}
}

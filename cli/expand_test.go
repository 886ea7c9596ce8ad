package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	itv1beta1 "github.com/podvirt/podvirt/api/instancetype/v1beta1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	podvirtscheme "github.com/podvirt/podvirt/internal/scheme"
)

// expand -f applies the instancetype the manifest names, read with the user's client, and no longer
// names it; one that does not exist is an error naming it.
func TestExpandAManifest(t *testing.T) {
	it := &itv1beta1.VirtualMachineInstancetype{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "small"},
		Spec: itv1beta1.VirtualMachineInstancetypeSpec{CPU: itv1beta1.CPUInstancetype{Guest: 2}, Memory: itv1beta1.MemoryInstancetype{Guest: resource.MustParse("128Mi")}}}
	c := fake.NewClientBuilder().WithScheme(podvirtscheme.New()).WithObjects(it).Build()
	expand := func(manifest string) (string, error) {
		var out bytes.Buffer
		o := &ExpandOptions{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(manifest), Out: &out, ErrOut: &out}, File: "-", Output: "yaml"}
		o.factory = func() (*clients, error) { return &clients{namespace: "ns1", client: c}, nil }
		err := o.Run(context.Background())
		return out.String(), err
	}
	const manifest = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: sized}
spec:
  instancetype: {kind: VirtualMachineInstancetype, name: %s}
  runStrategy: Halted
  template: {spec: {domain: {devices: {}}}}
`
	out, err := expand(strings.Replace(manifest, "%s", "small", 1))
	require.NoError(t, err)
	var vm virtv1.VirtualMachine
	require.NoError(t, yaml.Unmarshal([]byte(out), &vm))
	assert.Nil(t, vm.Spec.Instancetype, "expanded: it names no instancetype")
	require.NotNil(t, vm.Spec.Template.Spec.Domain.CPU)
	assert.Equal(t, uint32(2), vm.Spec.Template.Spec.Domain.CPU.Sockets*vm.Spec.Template.Spec.Domain.CPU.Cores*vm.Spec.Template.Spec.Domain.CPU.Threads)
	require.NotNil(t, vm.Spec.Template.Spec.Domain.Memory)
	assert.Equal(t, "128Mi", vm.Spec.Template.Spec.Domain.Memory.Guest.String())

	_, err = expand(strings.Replace(manifest, "%s", "huge", 1))
	assert.ErrorContains(t, err, "huge")
	_, err = expand(strings.Replace(manifest, "%s", "small", 1) + "---\n" + strings.Replace(manifest, "%s", "small", 1))
	assert.ErrorContains(t, err, "2 documents, want one VirtualMachine")
	_, err = expand("kind: Pod\n")
	assert.ErrorContains(t, err, `kind "Pod", want VirtualMachine`)
}

// The verbs Podvirt cannot serve exit 1 naming what they need, whatever flags KubeVirt's take.
func TestUnavailableVerbsSayWhatTheyNeed(t *testing.T) {
	for args, want := range map[string]string{
		"image-upload dv my-dv --size=1Gi --image-path=disk.img": "virtctl image-upload: not available in Podvirt: it needs CDI's upload proxy",
		"vmexport download my-export --vm=my-vm":                 "virtctl vmexport: not available in Podvirt: it needs KubeVirt's export API",
		"usbredir 0951:1666 my-vmi":                              "virtctl usbredir: not available in Podvirt: it needs USB redirection devices",
	} {
		_, err := run(t, "virtctl", strings.Fields(args)...)
		assert.ErrorContains(t, err, want, args)
		assert.Equal(t, ExitError, ExitCode(err), args)
	}
}

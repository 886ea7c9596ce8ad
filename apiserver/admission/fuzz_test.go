package admission

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/corpus"
)

// FuzzValidateInstanceSpec defaults and validates any instance spec (seeded with the API corpus)
// under the strictest and the most permissive policy: it never panics, every refusal names a field
// of the spec, and an accepted spec validates the same after defaulting again (defaults are
// stable). `make fuzz` runs it for minutes; `go test` runs the seeds. Run with -short: the
// package's integration tests need a control plane.
func FuzzValidateInstanceSpec(f *testing.F) {
	corpus.SeedInstanceSpecs(f, "../../api/v1/testdata/corpus")
	policies := []Policy{{}, {HostDisk: true, CrossNamespaceNetworks: true}}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec := &virtv1.VirtualMachineInstanceSpec{}
		if json.Unmarshal(data, spec) != nil {
			return
		}
		for _, p := range policies {
			s := spec.DeepCopy()
			DefaultInstance(s)
			errs := ValidateInstanceSpec(s, "tenant", p, field.NewPath("spec"))
			for _, e := range errs {
				if !strings.HasPrefix(e.Field, "spec") {
					t.Fatalf("a refusal names no field of the spec: %v", e)
				}
			}
			if len(errs) > 0 {
				continue
			}
			again := s.DeepCopy()
			DefaultInstance(again)
			if errs := ValidateInstanceSpec(again, "tenant", p, field.NewPath("spec")); len(errs) > 0 {
				t.Fatalf("accepted, then refused after defaulting again: %v", errs)
			}
		}
	})
}

// Package corpus reads the KubeVirt-style manifests in api/v1/testdata/corpus that the integration
// tests apply: each file is one object whose first line says what Podvirt must do with it,
//
//	# expect: accepted
//	# expect: refused spec.template.spec.domain.devices.sound
package corpus

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Manifest is one object of the corpus.
type Manifest struct {
	// File is the file's base name.
	File string
	// Object is the manifest as written.
	Object *unstructured.Unstructured
	// Refused is the field path admission must name; empty when the object must be accepted.
	Refused string
}

// Load reads every manifest in dir.
func Load(dir string) ([]Manifest, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []Manifest
	for _, f := range files {
		m, err := load(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Objects reads every object in dir (one per file, no expectation header): what the manifests
// need to exist, such as the instancetypes they name.
func Objects(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read object: %w", err)
		}
		obj, err := decode(f, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// decode reads one object strictly.
func decode(file string, raw []byte) (*unstructured.Unstructured, error) {
	obj := map[string]any{}
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func load(file string) (Manifest, error) {
	m := Manifest{File: filepath.Base(file)}
	raw, err := os.ReadFile(file)
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	header, _, _ := strings.Cut(string(raw), "\n")
	expect, ok := strings.CutPrefix(header, "# expect: ")
	switch refused, isRefused := strings.CutPrefix(expect, "refused "); {
	case !ok:
		return m, fmt.Errorf("%s: the first line must be `# expect: accepted` or `# expect: refused FIELD`", file)
	case isRefused:
		m.Refused = strings.TrimSpace(refused)
	case strings.TrimSpace(expect) != "accepted":
		return m, fmt.Errorf("%s: unknown expectation %q", file, expect)
	}
	m.Object, err = decode(file, raw)
	return m, err
}

// Contains reports whether every field set in want has the same value in got (lists item by
// item): what a round trip through the apiserver must keep.
func Contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !Contains(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !Contains(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		g, errG := json.Marshal(got)
		x, errX := json.Marshal(want)
		return errG == nil && errX == nil && string(g) == string(x)
	}
}

// SeedInstanceSpecs adds InstanceSpecs(dir) to a fuzz target's seed corpus.
func SeedInstanceSpecs(f *testing.F, dir string) {
	f.Helper()
	seeds, err := InstanceSpecs(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
}

// InstanceSpecs returns, as JSON, the instance spec of every manifest in dir (a VMI's spec, a VM's
// or replica set's template spec): the seed corpus of the fuzz targets that take an instance spec.
func InstanceSpecs(dir string) ([][]byte, error) {
	manifests, err := Load(dir)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, m := range manifests {
		path := []string{"spec"}
		if m.Object.GetKind() != "VirtualMachineInstance" {
			path = []string{"spec", "template", "spec"}
		}
		spec, found, err := unstructured.NestedFieldNoCopy(m.Object.Object, path...)
		if err != nil || !found {
			continue
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.File, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

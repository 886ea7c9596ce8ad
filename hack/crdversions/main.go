// Command crdversions adds the served, deprecated kubevirt.io/v1alpha3 version to the CRDs that
// controller-gen generated from api/v1, with exactly the v1 schema, printer columns and subresources.
//
// KubeVirt serves v1alpha3 with the same schema as v1 so that old manifests apply unchanged; since the
// schemas are identical no conversion webhook is needed. It is run by `make generate` and is
// idempotent: running it twice gives the same files.
//
//	go run ./hack/crdversions DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	storageVersion    = "v1"
	deprecatedVersion = "v1alpha3"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdversions DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "kubevirt.io_*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRD files in %s", os.Args[1])
	}
	for _, f := range files {
		if err != nil {
			break
		}
		err = addDeprecatedVersion(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func addDeprecatedVersion(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CRD: %w", err)
	}
	// Decode into the typed CRD first, so a malformed file fails here rather than at apply time.
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	// Edit the generic form so the rest of controller-gen's output is kept byte for byte.
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	spec, _ := doc["spec"].(map[string]any)
	list, _ := spec["versions"].([]any)
	var versions []any
	var v1 map[string]any
	for _, v := range list {
		m, _ := v.(map[string]any)
		switch m["name"] {
		case deprecatedVersion: // regenerated below
			continue
		case storageVersion:
			v1 = m
		}
		versions = append(versions, v)
	}
	if v1 == nil {
		return fmt.Errorf("%s has no %s version", path, storageVersion)
	}
	old := make(map[string]any, len(v1)+2)
	for k, v := range v1 {
		old[k] = v
	}
	old["name"] = deprecatedVersion
	old["storage"] = false
	old["served"] = true
	old["deprecated"] = true
	old["deprecationWarning"] = fmt.Sprintf("kubevirt.io/%s is deprecated; use kubevirt.io/%s", deprecatedVersion, storageVersion)
	spec["versions"] = append(versions, old)

	out, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append([]byte("---\n"), out...), 0o644); err != nil {
		return fmt.Errorf("write CRD: %w", err)
	}
	return nil
}

package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBuildTarballIsReproducibleAndComplete(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "bin", "tool"), "#!/bin/sh\n", 0o755|os.ModeSetuid)
	mustWrite(t, filepath.Join(src, "etc", "conf"), "x=1\n", 0o640)
	if err := os.Symlink("bin/tool", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(t.TempDir(), "single")
	mustWrite(t, single, "one", 0o755)
	spec := Spec{
		Names:      []string{"podvirt/x:dev", "docker.io/podvirt/y:dev"},
		Layers:     []Layer{{Src: src, Dest: "/opt/app"}, {Src: single, Dest: "/usr/local/bin/single"}},
		Entrypoint: []string{"/usr/local/bin/single"},
		Env:        []string{"A=B"},
		User:       "107:107",
	}
	out := t.TempDir()
	a, b := filepath.Join(out, "a.tar"), filepath.Join(out, "b.tar")
	if err := BuildTarball(spec, a); err != nil {
		t.Fatal(err)
	}
	// Later mtimes on the inputs must not change the result.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(src, "etc", "conf"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := BuildTarball(spec, b); err != nil {
		t.Fatal(err)
	}
	if sum(t, a) != sum(t, b) {
		t.Fatalf("two builds of the same inputs differ")
	}
	names, err := TarballImages(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names["docker.io/podvirt/x:dev"] == "" || names["docker.io/podvirt/x:dev"] != names["docker.io/podvirt/y:dev"] {
		t.Fatalf("index names: %v", names)
	}
	imgs, err := ReadTarball(a, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := imgs[0].Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "107:107" || cf.Config.Entrypoint[0] != "/usr/local/bin/single" || cf.OS != "linux" {
		t.Fatalf("config: %+v", cf.Config)
	}
	layers, _ := imgs[0].Image.Layers()
	got := layerEntries(t, layers[0].Compressed)
	want := map[string]string{
		"opt/": "dir 755", "opt/app/": "dir 755", "opt/app/bin/": "dir 755",
		"opt/app/bin/tool": "file 4755", "opt/app/etc/": "dir 755", "opt/app/etc/conf": "file 640",
		"opt/app/link": "link bin/tool",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("entry %s: got %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestValidateNamesTheBadFlag(t *testing.T) {
	cases := map[string]Spec{
		"--name":    {Layers: []Layer{{Src: "x"}}},
		"--layer":   {Names: []string{"a:b"}},
		"--env":     {Names: []string{"a:b"}, Layers: []Layer{{Src: "x"}}, Env: []string{"NOEQUALS"}},
		"--user":    {Names: []string{"a:b"}, Layers: []Layer{{Src: "x"}}, User: "root"},
		"--workdir": {Names: []string{"a:b"}, Layers: []Layer{{Src: "x"}}, WorkingDir: "rel"},
	}
	for flag, spec := range cases {
		err := spec.Validate()
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: got %v", flag, err)
		}
	}
	if _, err := ParseLayer("src=relative"); err == nil {
		t.Errorf("relative destination accepted")
	}
	if n, _ := NormalizeName("podvirt/x:dev"); n != "docker.io/podvirt/x:dev" {
		t.Errorf("NormalizeName: %s", n)
	}
}

func layerEntries(t *testing.T, open func() (io.ReadCloser, error)) map[string]string {
	rc, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 {
			t.Errorf("%s: mtime %v uid %d", h.Name, h.ModTime, h.Uid)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "dir " + octal(h.Mode)
		case tar.TypeReg:
			out[h.Name] = "file " + octal(h.Mode)
		case tar.TypeSymlink:
			out[h.Name] = "link " + h.Linkname
		}
	}
}

func octal(m int64) string { return strconv.FormatInt(m, 8) }

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func sum(t *testing.T, p string) [32]byte {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// Package version is the release every Podvirt binary reports (virtctl version, virt-api's version
// endpoint, the KubeVirt object's observedKubeVirtVersion): stamped at build time from git by
// hack/version.sh through -ldflags -X, as kubectl and KubeVirt stamp theirs. A binary built
// without the stamp (go run, go test) reports the VCS facts Go embedded, and "(devel)".
package version

import (
	"runtime"
	"runtime/debug"
)

// Info is a binary's version, with KubeVirt's fields and JSON names (kubevirt.io/client-go's
// version.Info): virtctl prints it as KubeVirt's does (%#v), virt-api serves it as JSON.
type Info struct {
	GitVersion   string `json:"gitVersion"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
}

// String is the release.
func (i Info) String() string { return i.GitVersion }

// Stamped by hack/version.sh (-X github.com/podvirt/podvirt/internal/version.gitVersion=…).
var (
	gitVersion   = ""
	gitCommit    = ""
	gitTreeState = ""
	buildDate    = ""
)

// Get is this binary's version.
func Get() Info {
	info := Info{
		GitVersion: gitVersion, GitCommit: gitCommit, GitTreeState: gitTreeState, BuildDate: buildDate,
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if info.GitVersion != "" {
		return info
	}
	info.GitVersion = "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.GitCommit = s.Value
		case "vcs.time":
			info.BuildDate = s.Value
		case "vcs.modified":
			info.GitTreeState = map[bool]string{true: "dirty", false: "clean"}[s.Value == "true"]
		}
	}
	return info
}

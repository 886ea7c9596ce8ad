package version

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	if got := Get(); got.GitVersion != "(devel)" || got.GoVersion != runtime.Version() {
		t.Errorf("unstamped (go test): %#v", got)
	}
	gitVersion, gitCommit, gitTreeState, buildDate = "v1.2.3", "abc", "clean", "2026-11-29T00:00:00Z"
	defer func() { gitVersion, gitCommit, gitTreeState, buildDate = "", "", "", "" }()
	got := Get()
	if got.GitVersion != "v1.2.3" || got.GitCommit != "abc" || got.GitTreeState != "clean" || got.BuildDate != "2026-11-29T00:00:00Z" {
		t.Errorf("stamped: %#v", got)
	}
}

// Command importrules checks that the packages' imports run the way the architecture does (CLI →
// API → controllers → Pod → node agent → launcher, contracts in api/): it reads the import graph
// from `go list -deps` (non-test imports) and fails naming every import that breaks a rule, with the
// chain that brings it in. `make lint` runs it.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

const module = "github.com/podvirt/podvirt/"

// rule: no package under from may reach (directly or through its imports) a package under any of
// forbid. A trailing "/..." means the folder and everything under it.
type rule struct {
	from   string
	forbid []string
	why    string
}

// controllerPackages are the reconcilers; none may import another (what two share lives in a package
// of its own, as podtemplate does).
var controllerPackages = []string{"controllers/vm", "controllers/vmi", "controllers/migration", "controllers/replicaset", "controllers/nodehealth"}

func rules() []rule {
	r := []rule{
		{"cli/...", []string{"controllers/...", "nodeagent/...", "apiserver/..."}, "the CLI talks to the API only"},
		{"apiserver/...", []string{"nodeagent/...", "controllers/..."}, "virt-api reaches the agents through api/agent/v1"},
		{"controllers/...", []string{"nodeagent/...", "apiserver/..."}, "controllers reach the node side through the API"},
		{"cmd/virt-api", []string{"nodeagent/...", "controllers/..."}, "virt-api links no agent or controller code"},
		{"cmd/virt-controller", []string{"nodeagent/...", "apiserver/..."}, "virt-controller links no agent or virt-api code"},
		{"cmd/virtctl", []string{"nodeagent/...", "controllers/...", "apiserver/..."}, "the CLI talks to the API only"},
		{"console/...", []string{"nodeagent/...", "controllers/...", "apiserver/...", "cli/..."}, "streaming is shared by all of them"},
	}
	for _, c := range controllerPackages {
		var others []string
		for _, o := range controllerPackages {
			if o != c {
				others = append(others, o)
			}
		}
		r = append(r, rule{c, others, "controllers import no sibling controller"})
	}
	return r
}

// apiAllowed are the only imports (besides the standard library and api/ itself) of a package under
// api/, so any client can import the contracts cheaply.
var apiAllowed = []string{"k8s.io/apimachinery/", "k8s.io/api/"}

func main() {
	graph, err := importGraph()
	if err != nil {
		fmt.Fprintln(os.Stderr, "importrules:", err)
		os.Exit(2)
	}
	problems := check(graph, rules())
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "importrules: %d import(s) run against the architecture (hack/importrules)\n", len(problems))
		os.Exit(1)
	}
}

// importGraph maps every package of the module and its dependencies to its imports.
func importGraph() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	return graph, sc.Err()
}

// under reports whether pkg (a module path) is pattern's package, or under it for "dir/...".
func under(pkg, pattern string) bool {
	rel, ok := strings.CutPrefix(pkg, module)
	if !ok {
		return false
	}
	if dir, all := strings.CutSuffix(pattern, "/..."); all {
		return rel == dir || strings.HasPrefix(rel, dir+"/")
	}
	return rel == pattern
}

// check returns one line per broken rule: the package, the forbidden one it reaches and the chain.
func check(graph map[string][]string, rs []rule) []string {
	var problems []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		if under(p, "api/...") {
			for _, imp := range graph[p] {
				if std(imp) || under(imp, "api/...") || slices.ContainsFunc(apiAllowed, func(a string) bool { return strings.HasPrefix(imp, a) }) {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s imports %s: api/ imports only k8s.io/apimachinery, k8s.io/api and api/", p, imp))
			}
		}
		for _, r := range rs {
			if !under(p, r.from) {
				continue
			}
			if chain := reach(graph, p, r.forbid); chain != nil {
				problems = append(problems, fmt.Sprintf("%s reaches %s (%s): %s", p, chain[len(chain)-1], r.why, strings.Join(chain, " → ")))
			}
		}
	}
	return problems
}

// reach returns the shortest import chain from p to a package under one of forbid, or nil.
func reach(graph map[string][]string, p string, forbid []string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range graph[cur] {
			if _, seen := prev[imp]; seen || !strings.HasPrefix(imp, module) {
				continue
			}
			prev[imp] = cur
			if slices.ContainsFunc(forbid, func(f string) bool { return under(imp, f) }) {
				var chain []string
				for at := imp; at != ""; at = prev[at] {
					chain = append([]string{strings.TrimPrefix(at, module)}, chain...)
				}
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// std reports whether an import path is the standard library's (no dot in its first element).
func std(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

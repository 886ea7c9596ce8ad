// Command report turns the JUnit file of a KubeVirt conformance run (hack/conformance/run.sh) into
// the results section of docs/conformance.md: totals per SIG and a row per conformance spec
// (passed; failed with the first line of why; skipped with why), with the date, the machine and the
// run's wall time. It replaces what lies between the results markers of the document.
//
//	go run ./hack/conformance/report --junit FILE --doc docs/conformance.md
package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"
)

const (
	beginMarker = "<!-- BEGIN conformance results (hack/conformance/report) -->"
	endMarker   = "<!-- END conformance results -->"
	// maxJUnit bounds the file read: a run's JUnit is a few MB.
	maxJUnit = 256 << 20
)

type suites struct {
	Suites []suite `xml:"testsuite"`
}

type suite struct {
	Time  float64    `xml:"time,attr"`
	Cases []testcase `xml:"testcase"`
}

type testcase struct {
	Name    string   `xml:"name,attr"`
	Status  string   `xml:"status,attr"`
	Failure *message `xml:"failure"`
	Error   *message `xml:"error"`
	Skipped *message `xml:"skipped"`
}

type message struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// row is one conformance spec's result.
type row struct {
	sig, name, status, why string
}

var labelsRE = regexp.MustCompile(`\s\[([^\[\]]*)\]$`)

func main() {
	junit := flag.String("junit", "", "the run's JUnit file")
	doc := flag.String("doc", "docs/conformance.md", "the document whose results section is replaced")
	flag.Parse()
	if err := run(*junit, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(junitPath, docPath string) error {
	f, err := os.Open(junitPath)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	defer f.Close()
	var s suites
	data, err := readBounded(f)
	if err != nil {
		return fmt.Errorf("--junit %s: %w", junitPath, err)
	}
	if err := xml.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("--junit %s: %w", junitPath, err)
	}
	rows, wall := collect(s)
	info, err := os.Stat(junitPath)
	if err != nil {
		return err
	}
	section := render(rows, wall, info.ModTime())
	old, err := os.ReadFile(docPath)
	if err != nil {
		return fmt.Errorf("--doc: %w", err)
	}
	b, e := bytes.Index(old, []byte(beginMarker)), bytes.Index(old, []byte(endMarker))
	if b < 0 || e < b {
		return fmt.Errorf("--doc %s: no %q … %q section", docPath, beginMarker, endMarker)
	}
	out := append(append(append([]byte{}, old[:b+len(beginMarker)]...), "\n"+section...), old[e:]...)
	if err := os.WriteFile(docPath, out, 0o644); err != nil {
		return err
	}
	fmt.Print(section)
	return nil
}

func readBounded(f *os.File) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxJUnit+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJUnit {
		return nil, fmt.Errorf("larger than %d bytes", maxJUnit)
	}
	return data, nil
}

// collect keeps the specs labelled conformance, by SIG.
func collect(s suites) ([]row, time.Duration) {
	var rows []row
	var wall float64
	for _, su := range s.Suites {
		wall += su.Time
		for _, tc := range su.Cases {
			m := labelsRE.FindStringSubmatch(tc.Name)
			if m == nil || !hasLabel(m[1], "conformance") {
				continue
			}
			r := row{name: strings.TrimPrefix(strings.TrimSuffix(tc.Name, m[0]), "[It] "), status: tc.Status, sig: sigOf(tc.Name)}
			switch {
			case tc.Failure != nil:
				r.why = firstLine(tc.Failure.Message, tc.Failure.Text)
			case tc.Error != nil:
				r.why = firstLine(tc.Error.Message, tc.Error.Text)
			case tc.Skipped != nil:
				r.why = firstLine(tc.Skipped.Message, tc.Skipped.Text)
			}
			if r.status == "skipped" && r.why == "" {
				r.why = "not run: left out (see Selection) or not reached"
			}
			rows = append(rows, r)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].sig != rows[j].sig {
			return rows[i].sig < rows[j].sig
		}
		return rows[i].name < rows[j].name
	})
	return rows, time.Duration(wall * float64(time.Second))
}

func hasLabel(list, want string) bool {
	for _, l := range strings.Split(list, ",") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

var sigRE = regexp.MustCompile(`\[sig-([a-z-]+)\]`)

func sigOf(name string) string {
	if m := sigRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return "other"
}

// firstLine is the first non-empty line of the message, or of the text, cut to 200 characters
// and made safe inside a table cell.
func firstLine(parts ...string) string {
	for _, p := range parts {
		for _, l := range strings.Split(p, "\n") {
			if l = strings.TrimSpace(l); l != "" && l != "skipped" {
				if r := []rune(l); len(r) > 200 {
					l = string(r[:200]) + "…"
				}
				return strings.NewReplacer("|", `\|`, "`", "'").Replace(l)
			}
		}
	}
	return ""
}

func render(rows []row, wall time.Duration, when time.Time) string {
	type tally struct{ passed, failed, skipped int }
	bySIG := map[string]*tally{}
	var sigs []string
	total := &tally{}
	for _, r := range rows {
		t := bySIG[r.sig]
		if t == nil {
			t = &tally{}
			bySIG[r.sig] = t
			sigs = append(sigs, r.sig)
		}
		for _, x := range []*tally{t, total} {
			switch r.status {
			case "passed":
				x.passed++
			case "skipped", "pending":
				x.skipped++
			default:
				x.failed++
			}
		}
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Run of %s on %s (%d cores, %s/%s); wall time %s.\n\n", when.UTC().Format("2006-01-02 15:04 MST"), host,
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, wall.Round(time.Second))
	b.WriteString("| SIG | passed | failed | skipped |\n|---|---|---|---|\n")
	for _, s := range sigs {
		t := bySIG[s]
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", s, t.passed, t.failed, t.skipped)
	}
	fmt.Fprintf(&b, "| **all %d** | **%d** | **%d** | **%d** |\n\n", len(rows), total.passed, total.failed, total.skipped)
	b.WriteString("| SIG | spec | result | why |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.sig, strings.ReplaceAll(r.name, "|", `\|`), r.status, r.why)
	}
	return b.String()
}

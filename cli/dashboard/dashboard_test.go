package dashboard

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// updating reports -update (the flag teatest's golden package defines; it rewrites ours too).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// fakeActions records the calls the dashboard makes; fail makes one action fail.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	fail  string
}

func (f *fakeActions) do(what, ns, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, what+" "+ns+"/"+name)
	if what == f.fail {
		return errors.New("the server said no")
	}
	return nil
}

func (f *fakeActions) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeActions) Start(_ context.Context, ns, n string) error   { return f.do("start", ns, n) }
func (f *fakeActions) Stop(_ context.Context, ns, n string) error    { return f.do("stop", ns, n) }
func (f *fakeActions) Restart(_ context.Context, ns, n string) error { return f.do("restart", ns, n) }
func (f *fakeActions) Pause(_ context.Context, ns, n string) error   { return f.do("pause", ns, n) }
func (f *fakeActions) Unpause(_ context.Context, ns, n string) error { return f.do("unpause", ns, n) }
func (f *fakeActions) Console(string, string) *exec.Cmd              { return exec.Command("true") }

func vm(name string, status virtv1.VirtualMachinePrintableStatus, strategy virtv1.VirtualMachineRunStrategy) virtv1.VirtualMachine {
	v := virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Minute))}}
	v.Spec.RunStrategy = &strategy
	v.Status.PrintableStatus = status
	return v
}

// sample is three VMs: one running with its instance, one stopped, one that cannot be scheduled.
func sample() []Row {
	web, db, big := vm("web", "Running", virtv1.RunStrategyAlways), vm("db", "Stopped", virtv1.RunStrategyHalted), vm("big", "ErrorUnschedulable", virtv1.RunStrategyAlways)
	web.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineReady, Status: metav1.ConditionTrue}}
	running := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}
	running.Status.Phase, running.Status.NodeName = virtv1.Running, "node-1"
	running.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.7"}}
	stuck := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big"}}
	stuck.Status.Phase = virtv1.Scheduling
	stuck.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstancePodScheduled, Status: metav1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}
	return Rows([]virtv1.VirtualMachine{web, db, big}, []virtv1.VirtualMachineInstance{running, stuck})
}

func TestRowsJoinVMsAndInstancesAndSayWhy(t *testing.T) {
	rows := sample()
	require.Len(t, rows, 3)
	assert.Equal(t, []string{"demo/big", "demo/db", "demo/web"}, []string{rows[0].Key(), rows[1].Key(), rows[2].Key()})
	assert.Equal(t, "Unschedulable: 0/1 nodes are available: 1 Insufficient memory.", rows[0].Why)
	assert.Equal(t, Row{Namespace: "demo", Name: "web", Status: "Running", Ready: true, Node: "node-1", IP: "10.0.0.7",
		Created: now.Add(-90 * time.Minute), Phase: "Running", Running: true}, rows[2])
	assert.False(t, rows[1].Running)
}

// press feeds keys to the model's Update, as the program would.
func press(m tea.Model, keys ...string) tea.Model {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		default:
			msg = tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		}
		m, _ = m.Update(msg)
	}
	return m
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cli/dashboard -update to create %s", path)
	assert.Equal(t, string(want), got, "%s differs (run with -update if intended)", path)
}

func TestGoldenViews(t *testing.T) {
	base := tea.Model(New("namespace demo", &fakeActions{}, func() time.Time { return now }, true))
	base, _ = base.Update(tea.WindowSizeMsg{Width: 110, Height: 12})
	base, _ = base.Update(RowsMsg(sample()))
	for name, keys := range map[string][]string{
		"list":          nil,
		"detail-stuck":  {"enter"},
		"help":          {"?"},
		"confirm-stop":  {"down", "down", "s"},
		"filter":        {"/", "w", "e"},
		"loading-empty": nil,
	} {
		t.Run(name, func(t *testing.T) {
			m := base
			if name == "loading-empty" {
				m, _ = New("all namespaces", &fakeActions{}, func() time.Time { return now }, true).Update(ConnMsg{Err: errors.New("connection refused")})
			}
			golden(t, name, press(m, keys...).View().Content)
		})
	}
}

// quitAfterActions records the status line after each action's result and ends the program once
// n results have come in, so the test reads them without racing the actions (which run as
// concurrent commands: their order is not the UI's to guarantee).
type quitAfterActions struct {
	tea.Model
	n        int
	statuses *[]string
}

func (q quitAfterActions) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m, cmd := q.Model.Update(msg)
	q.Model = m
	if _, ok := msg.(actionDoneMsg); ok {
		*q.statuses = append(*q.statuses, m.(Model).status)
		if q.n--; q.n == 0 {
			return q, tea.Sequence(cmd, tea.Quit)
		}
	}
	return q, cmd
}

// The flows through a real Bubble Tea program (teatest): filter, stop → confirmation → the request
// sent, restart → confirmation → its failure shown.
func TestFlows(t *testing.T) {
	actions := &fakeActions{fail: "restart"}
	var statuses []string
	tm := teatest.NewTestModel(t, quitAfterActions{New("namespace demo", actions, func() time.Time { return now }, true), 2, &statuses},
		teatest.WithInitialTermSize(110, 20))
	tm.Send(RowsMsg(sample()))
	tm.Type("/web")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	tm.Type("sy")
	tm.Type("ry")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(quitAfterActions).Model.(Model)
	assert.ElementsMatch(t, []string{"stop demo/web", "restart demo/web"}, actions.Calls(), "both after confirmation, on the filtered row")
	assert.Contains(t, statuses, "stop web: requested")
	assert.Contains(t, statuses, "restart web failed: the server said no")
	screen := final.View().Content
	assert.Contains(t, screen, "filter: web")
	assert.NotContains(t, screen, "db ", "the filter hides the other VMs")
}

func TestStartNeedsNoConfirmation(t *testing.T) {
	actions := &fakeActions{}
	m := tea.Model(New("demo", actions, func() time.Time { return now }, true))
	m, _ = m.Update(RowsMsg(sample()))
	m = press(m, "down") // db, stopped
	m, cmd := m.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
	require.NotNil(t, cmd, "start runs at once")
	m, _ = m.Update(cmd())
	assert.Equal(t, []string{"start demo/db"}, actions.Calls())
	assert.Contains(t, m.View().Content, "start db: requested")
	assert.True(t, strings.Contains(press(m, "c").View().Content, "db is not running: start it first"))
}

package dashboard

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// updating reports -update (the flag teatest's golden package defines; it rewrites ours too).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

// fakeActions records the calls the dashboard makes; fail makes one action fail.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	fail  Action
}

func (f *fakeActions) Do(_ context.Context, a Action, kind Kind, ns, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, string(a)+" "+kind.String()+" "+ns+"/"+name)
	switch a {
	case f.fail:
		return "", errors.New("the server said no")
	case ActVNC:
		return "VNC of " + ns + "/" + name + " on 127.0.0.1:5901", nil
	}
	return "", nil
}

func (f *fakeActions) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeActions) Console(string, string) *exec.Cmd { return exec.Command("true") }

func (f *fakeActions) Exec(_ context.Context, ns, name, line string) (ExecOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "exec "+ns+"/"+name+" "+line)
	return ExecOutcome{Output: "first line\n\x1b[2Jsecond line\n", ExitCode: 3}, nil
}

// fakeWatcher records what the model asks to watch.
type fakeWatcher struct {
	mu    sync.Mutex
	calls []string
}

func (w *fakeWatcher) Watch(_ int, ns string) { w.record("watch " + ns) }
func (w *fakeWatcher) WatchEvents(_ int, ns string, names ...string) {
	w.record("events " + ns + "/" + strings.Join(names, ","))
}

func (w *fakeWatcher) record(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, s)
}

func (w *fakeWatcher) Calls() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

func vm(name string, status virtv1.VirtualMachinePrintableStatus, strategy virtv1.VirtualMachineRunStrategy) virtv1.VirtualMachine {
	v := virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Minute))}}
	v.Spec.RunStrategy = &strategy
	v.Status.PrintableStatus = status
	v.Spec.Template = &virtv1.VirtualMachineInstanceTemplateSpec{Spec: virtv1.VirtualMachineInstanceSpec{
		Domain: virtv1.DomainSpec{CPU: &virtv1.CPU{Cores: 2}, Memory: &virtv1.Memory{Guest: ptr.To(resource.MustParse("64Mi"))},
			Devices: virtv1.Devices{Disks: []virtv1.Disk{{Name: "root"}, {Name: "cloudinit"}}}},
		Volumes: []virtv1.Volume{{Name: "root", VolumeSource: virtv1.VolumeSource{ContainerDisk: &virtv1.ContainerDiskSource{Image: "localhost/podvirt/demo-guest:1"}}},
			{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{}}}},
		Networks: []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}}},
	}}
	return v
}

func transitions(phases ...virtv1.VirtualMachineInstancePhase) []virtv1.VirtualMachineInstancePhaseTransitionTimestamp {
	out := make([]virtv1.VirtualMachineInstancePhaseTransitionTimestamp, len(phases))
	for i, p := range phases {
		out[i] = virtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: metav1.NewTime(now.Add(-time.Hour + time.Duration(i)*700*time.Millisecond))}
	}
	return out
}

// sample is three VMs (one running with its instance, one stopped, one that cannot be scheduled),
// their two instances and a replica set, as the Source sends them for namespace demo.
func sample() SnapshotMsg {
	web, db, big := vm("web", "Running", virtv1.RunStrategyAlways), vm("db", "Stopped", virtv1.RunStrategyHalted), vm("big", "ErrorUnschedulable", virtv1.RunStrategyAlways)
	web.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineReady, Status: metav1.ConditionTrue}}
	running := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	running.Status.Phase, running.Status.NodeName = virtv1.Running, "node-1"
	running.Status.Interfaces = []virtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.7"}}
	running.Status.PhaseTransitionTimestamps = transitions(virtv1.Pending, virtv1.Scheduling, virtv1.Scheduled, virtv1.Running)
	running.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstanceReady, Status: metav1.ConditionTrue}}
	stuck := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))}}
	stuck.Status.Phase = virtv1.Scheduling
	stuck.Status.PhaseTransitionTimestamps = transitions(virtv1.Pending, virtv1.Scheduling)
	stuck.Status.Conditions = []metav1.Condition{{Type: virtv1.VirtualMachineInstancePodScheduled, Status: metav1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}}
	rs := virtv1.VirtualMachineInstanceReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "pool", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour))},
		Spec: virtv1.VirtualMachineInstanceReplicaSetSpec{Replicas: ptr.To[int32](3)}, Status: virtv1.VirtualMachineInstanceReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}}
	vmis := []virtv1.VirtualMachineInstance{running, stuck}
	return SnapshotMsg{Namespace: "demo", VMs: Rows([]virtv1.VirtualMachine{web, db, big}, vmis), VMIs: InstanceRows(vmis),
		ReplicaSets: ReplicaSetRows([]virtv1.VirtualMachineInstanceReplicaSet{rs})}
}

func keys2(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key() + " " + r.Status
	}
	return out
}

func TestRowsJoinVMsAndInstancesAndSayWhy(t *testing.T) {
	s := sample()
	assert.Equal(t, []string{"demo/big ErrorUnschedulable", "demo/db Stopped", "demo/web Running"}, keys2(s.VMs))
	assert.Equal(t, "Unschedulable: 0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		s.VMs[0].Why(now))
	web := s.VMs[2]
	assert.Equal(t, []any{"node-1", "10.0.0.7", "Running", true, true}, []any{web.Node, web.IP, web.Phase, web.Ready, web.Running})
	assert.Empty(t, web.Why(now))
	assert.False(t, s.VMs[1].Running)
	assert.Equal(t, []string{"demo/big Scheduling", "demo/web Running"}, keys2(s.VMIs))
	assert.Equal(t, []string{"demo/pool 2/3"}, keys2(s.ReplicaSets))

	paused := *s.VMIs[1].vmi
	paused.Status.Conditions = append(paused.Status.Conditions, metav1.Condition{Type: virtv1.VirtualMachineInstancePaused, Status: metav1.ConditionTrue})
	paused.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-3 * time.Minute)))
	crashing := vm("crash", virtv1.VirtualMachineStatusCrashLoopBackOff, virtv1.RunStrategyAlways)
	crashing.Status.StartFailure = &virtv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3, RetryAfterTimestamp: ptr.To(metav1.NewTime(now.Add(40 * time.Second)))}
	assert.Equal(t, "CrashLoopBackOff: the guest failed to start 3 times in a row; next attempt in 40s", Rows([]virtv1.VirtualMachine{crashing}, nil)[0].Why(now))

	row := InstanceRows([]virtv1.VirtualMachineInstance{paused})[0]
	assert.Equal(t, "Paused", row.Status)
	assert.Equal(t, "StuckTerminating: deleted 3m ago and still waiting for the guest to shut down; a forced stop (ctrl+k) ends it at once", row.Why(now))
}

// keyMsg is the key press the program would send for k.
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+d", "ctrl+k":
		return tea.KeyPressMsg{Code: rune(k[5]), Mod: tea.ModCtrl}
	}
	r := rune(k[0])
	if r >= 'A' && r <= 'Z' {
		return tea.KeyPressMsg{Code: r + 'a' - 'A', ShiftedCode: r, Mod: tea.ModShift, Text: k}
	}
	return tea.KeyPressMsg{Code: r, Text: k}
}

// press feeds keys to the model's Update, as the program would, running no commands.
func press(m tea.Model, keys ...string) tea.Model {
	for _, k := range keys {
		m, _ = m.Update(keyMsg(k))
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

// loaded is a plain model of namespace demo at width×height with the sample shown.
func loaded(ns string, width, height int) tea.Model {
	m := tea.Model(New(ns, &fakeActions{}, &fakeWatcher{}, clock, true))
	m, _ = m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	s := sample()
	s.Namespace = ns
	m, _ = m.Update(s)
	return m
}

func TestGoldenViews(t *testing.T) {
	webEvents := EventsMsg{Key: "demo/web", Events: []Event{
		{Type: "Normal", Reason: "SuccessfulCreate", Object: "VirtualMachine/web", Message: "Started the virtual machine by creating the new virtual machine instance web", Last: now.Add(-time.Hour)},
		{Type: "Warning", Reason: "BackOff", Object: "Pod/virt-launcher-web-x7k2p", Message: "Back-off pulling image", Last: now.Add(-50 * time.Minute), Count: 3},
	}}
	for name, tc := range map[string]struct {
		ns   string
		w, h int
		keys []string
		msgs []tea.Msg
	}{
		"list":            {ns: "demo", w: 110, h: 14},
		"list-80x24":      {ns: "demo", w: 80, h: 24},
		"list-all":        {w: 110, h: 14},
		"list-vmi":        {ns: "demo", w: 110, h: 14, keys: []string{":", "v", "m", "i", "enter"}},
		"list-vmirs":      {ns: "demo", w: 110, h: 14, keys: []string{":", "v", "m", "i", "r", "s", "enter"}},
		"sorted-status":   {ns: "demo", w: 110, h: 14, keys: []string{"S", "S"}},
		"detail":          {ns: "demo", w: 100, h: 24, keys: []string{"down", "down", "enter"}, msgs: []tea.Msg{webEvents}},
		"detail-stuck":    {ns: "demo", w: 80, h: 24, keys: []string{"enter"}},
		"detail-vmirs":    {ns: "demo", w: 80, h: 24, keys: []string{":", "v", "m", "i", "r", "s", "enter", "enter"}},
		"help":            {ns: "demo", w: 110, h: 20, keys: []string{"?"}},
		"confirm-stop":    {ns: "demo", w: 110, h: 14, keys: []string{"down", "down", "s"}},
		"confirm-delete":  {ns: "demo", w: 110, h: 14, keys: []string{"ctrl+d"}},
		"confirm-force":   {ns: "demo", w: 110, h: 14, keys: []string{"down", "down", "enter", "ctrl+k"}},
		"filter":          {ns: "demo", w: 110, h: 14, keys: []string{"/", "w", "e"}},
		"filter-nothing":  {ns: "demo", w: 110, h: 14, keys: []string{"/", "x", "y", "enter"}},
		"command":         {ns: "demo", w: 110, h: 14, keys: []string{":", "n", "s", " "}},
		"unknown-command": {ns: "demo", w: 110, h: 14, keys: []string{":", "x", "enter"}},
		"disconnected":    {ns: "demo", w: 110, h: 14, msgs: []tea.Msg{ConnMsg{Err: errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")}}},
	} {
		t.Run(name, func(t *testing.T) {
			m := loaded(tc.ns, tc.w, tc.h)
			m = press(m, tc.keys...)
			for _, msg := range tc.msgs {
				m, _ = m.Update(msg)
			}
			golden(t, name, m.View().Content)
		})
	}
	t.Run("loading", func(t *testing.T) {
		m, _ := New("", &fakeActions{}, &fakeWatcher{}, clock, true).Update(ConnMsg{Err: errors.New("connection refused")})
		golden(t, "loading", m.View().Content)
	})
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
// sent, restart → confirmation → its failure shown; then in the instances view, delete →
// confirmation → the instance deleted.
func TestFlows(t *testing.T) {
	actions, watcher := &fakeActions{fail: ActRestart}, &fakeWatcher{}
	var statuses []string
	tm := teatest.NewTestModel(t, quitAfterActions{New("demo", actions, watcher, clock, true), 3, &statuses},
		teatest.WithInitialTermSize(110, 20))
	tm.Send(sample())
	tm.Type("/web")
	tm.Send(keyMsg("enter"))
	tm.Type("sy")
	tm.Type("ry")
	tm.Type(":vmi")
	tm.Send(keyMsg("enter"))
	tm.Send(keyMsg("ctrl+d"))
	tm.Type("y")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(quitAfterActions).Model.(Model)
	assert.ElementsMatch(t, []string{"stop VMs demo/web", "restart VMs demo/web", "delete VMIs demo/web"}, actions.Calls(),
		"each after confirmation, on the filtered row")
	assert.Contains(t, statuses, "stop web: requested")
	assert.Contains(t, statuses, "restart web failed: the server said no")
	assert.Contains(t, watcher.Calls(), "watch demo", "Init starts the watch")
	screen := final.View().Content
	assert.Contains(t, screen, "VMIs · namespace demo  2 (1 shown)")
	assert.NotContains(t, screen, "big ", "the filter hides the other instances")
}

// run runs cmd and feeds what it returns (batches too) back into m, as the program would, except
// ticks.
func run(t *testing.T, m tea.Model, cmd tea.Cmd) tea.Model {
	t.Helper()
	if cmd == nil {
		return m
	}
	switch msg := cmd().(type) {
	case tea.BatchMsg:
		for _, c := range msg {
			m = run(t, m, c)
		}
	case nil, tickMsg, tea.QuitMsg, spinner.TickMsg:
	default:
		var next tea.Cmd
		m, next = m.Update(msg)
		if _, isAction := msg.(actionDoneMsg); isAction {
			return run(t, m, next)
		}
	}
	return m
}

// A started VM is followed until the list shows it Running; the spinner stops then.
func TestStartIsFollowedUntilRunning(t *testing.T) {
	actions := &fakeActions{}
	m := tea.Model(New("demo", actions, &fakeWatcher{}, clock, true))
	m, _ = m.Update(sample())
	m, cmd := m.Update(keyMsg("down")) // db, stopped
	m, cmd = m.Update(keyMsg("s"))
	require.NotNil(t, cmd, "start runs at once, without confirmation")
	m = run(t, m, cmd)
	assert.Equal(t, []string{"start VMs demo/db"}, actions.Calls())
	assert.Equal(t, "start db: requested", m.(Model).status)
	assert.True(t, m.(Model).busy())

	for _, status := range []virtv1.VirtualMachinePrintableStatus{"Starting", "Running"} {
		s := sample()
		db := vm("db", status, virtv1.RunStrategyAlways)
		s.VMs = Rows([]virtv1.VirtualMachine{db}, nil)
		m, _ = m.Update(s)
		if status == "Starting" {
			assert.Equal(t, "start db: requested · Starting", m.(Model).status)
		}
	}
	assert.Equal(t, "db is Running", m.(Model).status)
	assert.False(t, m.(Model).busy(), "the spinner stops")
	assert.Contains(t, press(m, "c").View().Content, "db is not running: start it first", "no instance yet in the snapshot")
}

func TestActionsByKindAndState(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   []string
		calls  []string
		status string
	}{
		{"stop asks first", []string{"down", "down", "s", "n"}, nil, "cancelled"},
		{"force stop asks first", []string{"down", "down", "ctrl+k", "y"}, []string{"force stop VMs demo/web"}, "force stop web: requested"},
		{"pause a running VM", []string{"down", "down", "p"}, []string{"pause VMs demo/web"}, "pause web: requested"},
		{"migrate asks first", []string{"down", "down", "m", "y"}, []string{"migrate VMs demo/web"}, "migrate web: requested"},
		{"vnc shows the port", []string{"down", "down", "v"}, []string{"vnc VMs demo/web"}, "VNC of demo/web on 127.0.0.1:5901"},
		{"vnc of a stopped VM", []string{"down", "v"}, nil, "db is not running: start it first (s)"},
		{"delete a VM", []string{"down", "ctrl+d", "y"}, []string{"delete VMs demo/db"}, "delete db: requested"},
		{"stop is for VMs", []string{":", "v", "m", "i", "enter", "s"}, nil, "start, stop and restart act on VMs (:vm); here: ctrl+d deletes big"},
		{"migrate an instance", []string{":", "v", "m", "i", "enter", "down", "m", "y"}, []string{"migrate VMIs demo/web"}, "migrate web: requested"},
		{"nothing but delete on a replica set", []string{":", "v", "m", "i", "r", "s", "enter", "p"}, nil, "pause, migrate and VNC act on VMs and VMIs (:vm, :vmi)"},
		{"delete a replica set", []string{":", "v", "m", "i", "r", "s", "enter", "ctrl+d", "y"}, []string{"delete VMIRSs demo/pool"}, "delete pool: requested"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actions := &fakeActions{}
			m := tea.Model(New("demo", actions, &fakeWatcher{}, clock, true))
			m, _ = m.Update(sample())
			for _, k := range tc.keys {
				var cmd tea.Cmd
				m, cmd = m.Update(keyMsg(k))
				m = run(t, m, cmd)
			}
			assert.Equal(t, tc.calls, actions.Calls())
			assert.Equal(t, tc.status, m.(Model).status)
		})
	}
}

// :ns watches another namespace; snapshots of the old one arriving late are ignored.
func TestNamespaceSwitch(t *testing.T) {
	watcher := &fakeWatcher{}
	m := tea.Model(New("demo", &fakeActions{}, watcher, clock, true))
	m, _ = m.Update(sample())
	m = press(m, ":", "n", "s", " ", "o", "t", "h", "e", "r")
	m, cmd := m.Update(keyMsg("enter"))
	require.NotNil(t, cmd)
	assert.Nil(t, cmd())
	assert.Equal(t, []string{"watch other"}, watcher.Calls())
	m, _ = m.Update(sample()) // demo's, late
	assert.Contains(t, m.View().Content, "VMs · namespace other  loading…")
	m, _ = m.Update(SnapshotMsg{Namespace: "other"})
	assert.Contains(t, m.View().Content, "no VMs")

	m = press(m, ":", "n", "s", " ", "a", "l", "l")
	_, cmd = m.Update(keyMsg("enter"))
	cmd()
	assert.Equal(t, []string{"watch other", "watch "}, watcher.Calls(), "all namespaces")
}

// The detail view watches the object's events while it is open.
func TestDetailWatchesEvents(t *testing.T) {
	watcher := &fakeWatcher{}
	m := tea.Model(New("demo", &fakeActions{}, watcher, clock, true))
	m, _ = m.Update(sample())
	m, cmd := m.Update(keyMsg("enter"))
	cmd()
	assert.Contains(t, m.View().Content, "events:     loading…")
	m, _ = m.Update(EventsMsg{Key: "demo/big"})
	assert.Contains(t, m.View().Content, "events:     none")
	_, cmd = m.Update(keyMsg("esc"))
	cmd()
	assert.Equal(t, []string{"events demo/big", "events /"}, watcher.Calls(), "no launcher Pod in the sample's status")
}

// After Stop, and for requests older than the last carried out, the Source starts nothing.
func TestSourceIgnoresStaleAndLateRequests(t *testing.T) {
	src := NewSource(nil, func(tea.Msg) {})
	src.WatchEvents(3, "demo") // no names: nothing to start, but generation 3 is carried out
	src.WatchEvents(2, "demo", "web")
	assert.Nil(t, src.events, "an older events request")
	src.Stop()
	src.Watch(4, "demo")
	src.WatchEvents(5, "demo", "web")
	assert.Nil(t, src.list, "a watch after Stop")
	assert.Nil(t, src.events, "an events watch after Stop")
}

// without is the sample without the VM name (as the next snapshot after it was deleted).
func without(name string) SnapshotMsg {
	s := sample()
	s.VMs = slices.DeleteFunc(s.VMs, func(r Row) bool { return r.Name == name })
	return s
}

// The object in view, or awaiting confirmation, is the one acted on, whatever happens to the list.
func TestTheObjectInViewStaysTheTarget(t *testing.T) {
	t.Run("gone while the confirmation is open: nothing is done", func(t *testing.T) {
		actions := &fakeActions{}
		m := tea.Model(New("demo", actions, &fakeWatcher{}, clock, true))
		m, _ = m.Update(sample())
		m = press(m, "down", "down", "s") // stop web?
		m, _ = m.Update(without("web"))
		m, cmd := m.Update(keyMsg("y"))
		assert.Nil(t, cmd)
		assert.Empty(t, actions.Calls())
		assert.Equal(t, "web is gone", m.(Model).status)
		assert.Contains(t, m.View().Content, "> db", "the cursor is on a row again")
	})
	t.Run("movement keys do not change the object in view", func(t *testing.T) {
		m := press(loaded("demo", 100, 24), "enter", "down", "j", "G")
		assert.Contains(t, m.View().Content, "demo/big  VM")
	})
	t.Run("a filter that no longer matches does not hide the object in view", func(t *testing.T) {
		m := press(loaded("demo", 100, 24), "/", "r", "u", "n", "n", "i", "enter", "enter") // web, Running
		s := sample()
		s.VMs[2].Status = "Stopped"
		m, _ = m.Update(s)
		assert.Contains(t, m.View().Content, "demo/web  VM")
		assert.Contains(t, m.View().Content, "status:     Stopped")
	})
	t.Run("gone under the help: said so, no neighbour shown", func(t *testing.T) {
		m := press(loaded("demo", 100, 24), "enter", "?") // big
		m, _ = m.Update(without("big"))
		m = press(m, "x")
		assert.Contains(t, m.View().Content, "demo/big is gone (deleted)")
		assert.Empty(t, press(m, "s").(Model).confirm.act, "no action on a neighbour")
	})
}

// s starts a stopped VM whatever its run strategy (Manual, RerunOnFailure), and stops one that runs.
func TestStartStopFollowsTheInstance(t *testing.T) {
	manual := vm("manual", "Stopped", virtv1.RunStrategyManual)
	rerun := vm("rerun", "Running", virtv1.RunStrategyRerunOnFailure)
	inst := virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "rerun"}}
	inst.Status.Phase = virtv1.Running
	rows := Rows([]virtv1.VirtualMachine{manual, rerun}, []virtv1.VirtualMachineInstance{inst})
	assert.False(t, rows[0].Running, "Manual without an instance: s starts it")
	assert.True(t, rows[1].Running, "RerunOnFailure with a running instance: s stops it")
}

// A followed action ends when the object is gone, reaches an error, or the namespace changes.
func TestFollowEnds(t *testing.T) {
	started := func() tea.Model {
		m := tea.Model(New("demo", &fakeActions{}, &fakeWatcher{}, clock, true))
		m, _ = m.Update(sample())
		m, cmd := m.Update(keyMsg("down"))
		m, cmd = m.Update(keyMsg("s")) // start db
		return run(t, m, cmd)
	}
	m, _ := started().Update(without("db"))
	assert.Equal(t, "start db: db is gone", m.(Model).status)
	assert.False(t, m.(Model).busy())

	s := sample()
	s.VMs[1].Status = "ErrorUnschedulable"
	m, _ = started().Update(s)
	assert.Equal(t, "start db: db is ErrorUnschedulable (enter shows why)", m.(Model).status)
	assert.False(t, m.(Model).busy())

	m = press(started(), ":", "n", "s", " ", "x")
	m, _ = m.Update(keyMsg("enter"))
	assert.False(t, m.(Model).busy(), ":ns ends the follow")
}

// x asks for a command, runs it in the selected guest and shows its output (the guest's control
// characters dropped) with its exit code until any key; a stopped VM has no guest to run it in.
func TestExecInTheSelectedGuest(t *testing.T) {
	actions := &fakeActions{}
	m := tea.Model(New("demo", actions, &fakeWatcher{}, clock, true))
	m, _ = m.Update(tea.WindowSizeMsg{Width: 100, Height: 20})
	m, _ = m.Update(sample())
	m = press(m, "G", "x") // web, the last by name, runs
	require.Equal(t, modeExec, m.(Model).mode, m.(Model).status)
	m = press(m, "u", "n", "a", "m", "e", "space", "-", "a")
	assert.Contains(t, m.View().Content, "web$ uname -a")
	m, cmd := m.Update(keyMsg("enter"))
	require.NotNil(t, cmd)
	m = run(t, m, cmd)
	assert.Equal(t, []string{"exec demo/web uname -a"}, actions.Calls())
	screen := m.View().Content
	assert.Contains(t, screen, "first line\n?[2Jsecond line")
	assert.Contains(t, screen, "exec in web: uname -a: exit code 3")
	assert.False(t, m.(Model).busy())
	m = press(m, "j")
	assert.Equal(t, modeList, m.(Model).mode, "any key goes back")

	m = press(m, "k", "x") // db is stopped
	assert.Contains(t, m.View().Content, "db is not running: start it first")
	assert.Equal(t, modeList, m.(Model).mode)
}

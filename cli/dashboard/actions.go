package dashboard

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// Action is something the dashboard does to an object.
type Action string

// The actions: the subresource calls by their names in subv1.Table, and two of the dashboard's own.
const (
	ActStart     Action = subv1.Start
	ActStop      Action = subv1.Stop
	ActForceStop Action = "force stop"
	ActRestart   Action = subv1.Restart
	ActPause     Action = subv1.Pause
	ActUnpause   Action = subv1.Unpause
	ActMigrate   Action = subv1.Migrate
	ActDelete    Action = "delete"
	ActVNC       Action = subv1.VNC
)

// actionTimeout bounds one request.
const actionTimeout = 30 * time.Second

// Actions are the calls the dashboard makes (subresources and deletes through the API). They run
// in commands, never in Update.
type Actions interface {
	// Do carries out a on the object of kind in namespace/name. A non-empty result replaces
	// "requested" in the status line (the VNC proxy's address).
	Do(ctx context.Context, a Action, kind Kind, namespace, name string) (string, error)
	// Console is the command that attaches the terminal to the instance's console until its
	// escape key.
	Console(namespace, name string) *exec.Cmd
	// Exec runs line with sh -c in the instance's guest through its guest agent.
	Exec(ctx context.Context, namespace, name, line string) (ExecOutcome, error)
}

// actionDoneMsg ends an action; err is shown in the status line.
type actionDoneMsg struct {
	p      pendingAction
	result string
	err    error
}

// pendingAction is an action on a row, waiting for confirmation or running.
type pendingAction struct {
	act Action
	row Row
}

func (p pendingAction) String() string { return string(p.act) + " " + p.row.Name }

// following is an action whose outcome the list will show: the row reaching status (gone: the
// row disappearing), after having left it first when it started there (a restart); left records
// that it has.
type following struct {
	p      pendingAction
	status string
	gone   bool
	left   bool
}

// outcomes is the status each action leads to (absent: nothing to follow).
var outcomes = map[Action]string{ActStart: "Running", ActStop: "Stopped", ActForceStop: "Stopped", ActRestart: "Running",
	ActPause: "Paused", ActUnpause: "Running"}

// notRunning follows the name of an object whose instance does not run.
const notRunning = " is not running: start it first (s)"

// confirmed are the actions that ask first: they stop or remove something.
var confirmed = map[Action]bool{ActStop: true, ActForceStop: true, ActRestart: true, ActMigrate: true, ActDelete: true}

// action maps an action key to the selected row: destructive ones ask first.
func (m Model) action(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	row, ok := m.target()
	if !ok {
		return m, nil
	}
	if key.Matches(msg, keys.Console) {
		return m.console(row)
	}
	if key.Matches(msg, keys.Exec) {
		return m.execPrompt(row)
	}
	act, problem := actionFor(msg, row)
	switch {
	case problem != "":
		m.status = problem
		return m, nil
	case act == "":
		return m, nil
	case confirmed[act]:
		m.previous, m.mode, m.confirm = m.mode, modeConfirm, pendingAction{act, row}
		return m, nil
	}
	return m.start(pendingAction{act, row})
}

// actionFor is the action a key means on row, or why it cannot be done there.
func actionFor(msg tea.KeyPressMsg, row Row) (Action, string) {
	running := row.Phase == "Running"
	isVM, isInstance := row.Kind == KindVM, row.Kind != KindVMIRS
	switch {
	case key.Matches(msg, keys.StartStop, keys.ForceStop, keys.Restart) && !isVM:
		return "", fmt.Sprintf("start, stop and restart act on VMs (:vm); here: ctrl+d deletes %s", row.Name)
	case key.Matches(msg, keys.StartStop) && row.Running:
		return ActStop, ""
	case key.Matches(msg, keys.StartStop):
		return ActStart, ""
	case key.Matches(msg, keys.ForceStop):
		return ActForceStop, ""
	case key.Matches(msg, keys.Restart):
		return ActRestart, ""
	case key.Matches(msg, keys.Delete):
		return ActDelete, ""
	case key.Matches(msg, keys.Pause, keys.Migrate, keys.VNC) && !isInstance:
		return "", "pause, migrate and VNC act on VMs and VMIs (:vm, :vmi)"
	case key.Matches(msg, keys.Pause, keys.Migrate, keys.VNC) && !running:
		return "", row.Name + notRunning
	case key.Matches(msg, keys.Pause) && row.paused():
		return ActUnpause, ""
	case key.Matches(msg, keys.Pause):
		return ActPause, ""
	case key.Matches(msg, keys.Migrate):
		return ActMigrate, ""
	case key.Matches(msg, keys.VNC):
		return ActVNC, ""
	}
	return "", ""
}

// console hands the terminal to the instance's console until its escape key.
func (m Model) console(row Row) (tea.Model, tea.Cmd) {
	if row.Kind == KindVMIRS || row.Phase != "Running" {
		m.status = row.Name + notRunning
		return m, nil
	}
	p := pendingAction{act: subv1.Console, row: row}
	return m, tea.ExecProcess(m.actions.Console(row.Namespace, row.Name), func(err error) tea.Msg { return actionDoneMsg{p: p, err: err} })
}

// start runs p as a command, with the spinner going while it is in flight.
func (m Model) start(p pendingAction) (tea.Model, tea.Cmd) {
	m.status, m.follow = p.String()+"…", nil
	m.inFlight++
	actions := m.actions
	run := func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
		defer cancel()
		result, err := actions.Do(ctx, p.act, p.row.Kind, p.row.Namespace, p.row.Name)
		return actionDoneMsg{p: p, result: result, err: err}
	}
	return m, tea.Batch(run, m.spin.Tick) // a second tick chain is dropped by the spinner
}

// actionDone shows an action's outcome and follows it in the list when it has one to show.
func (m Model) actionDone(msg actionDoneMsg) (tea.Model, tea.Cmd) {
	if msg.p.act != subv1.Console {
		m.inFlight--
	}
	switch {
	case msg.err != nil:
		m.status = fmt.Sprintf("%s failed: %v", msg.p, msg.err)
	case msg.result != "":
		m.status = msg.result
	case msg.p.act == subv1.Console:
		m.status = ""
	default:
		m.status = msg.p.String() + ": requested"
		if st, ok := outcomes[msg.p.act]; ok || msg.p.act == ActDelete {
			m.follow = &following{p: msg.p, status: st, gone: msg.p.act == ActDelete}
			m.checkFollow()
			if m.follow != nil {
				return m, m.spin.Tick
			}
		}
	}
	return m, nil
}

// checkFollow ends the followed action once the list shows its outcome, an error status, or the
// object gone.
func (m *Model) checkFollow() {
	f := m.follow
	if f == nil {
		return
	}
	now, found := m.find(f.p.row.Kind, f.p.row.Key())
	switch {
	case f.gone && !found:
		m.status, m.follow = fmt.Sprintf("%s deleted", f.p.row.Name), nil
	case f.gone:
	case !found:
		m.status, m.follow = fmt.Sprintf("%s: %s is gone", f.p, f.p.row.Name), nil
	case now.Status == f.status && (f.left || f.p.row.Status != f.status):
		m.status, m.follow = fmt.Sprintf("%s is %s", f.p.row.Name, now.Status), nil
	case failedStatus(now.Status) && now.Status != f.p.row.Status:
		m.status, m.follow = fmt.Sprintf("%s: %s is %s (enter shows why)", f.p, f.p.row.Name, now.Status), nil
	default:
		f.left = f.left || now.Status != f.status
		if now.Status != f.p.row.Status {
			m.status = fmt.Sprintf("%s: requested · %s", f.p, now.Status)
		}
	}
}

// failedStatus reports a VM status that an action will not get past by itself.
func failedStatus(status string) bool {
	switch status {
	case "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "Unschedulable", "Failed":
		return true
	}
	return strings.HasPrefix(status, "Error")
}

// busy reports an action in flight or being followed (the spinner runs).
func (m Model) busy() bool { return m.inFlight > 0 || m.follow != nil }

package dashboard

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	tea "charm.land/bubbletea/v2"
)

// Actions are the calls the dashboard makes on a VM (subresources through the API). They run in
// commands, never in Update.
type Actions interface {
	Start(ctx context.Context, namespace, name string) error
	Stop(ctx context.Context, namespace, name string) error
	Restart(ctx context.Context, namespace, name string) error
	Pause(ctx context.Context, namespace, name string) error
	Unpause(ctx context.Context, namespace, name string) error
	// Console is the command that attaches the terminal to the VM's console until its escape key.
	Console(namespace, name string) *exec.Cmd
}

// Messages.
type (
	// RowsMsg replaces the rows (the Source's snapshot after a watch event).
	RowsMsg []Row
	// ConnMsg reports the watch connection: Err non-nil while disconnected.
	ConnMsg struct{ Err error }
	// actionDoneMsg ends an action; err is shown in the status line.
	actionDoneMsg struct {
		what string
		err  error
	}
)

type mode int

const (
	modeList mode = iota
	modeDetail
	modeHelp
	modeConfirm
	modeFilter
)

// Model is the dashboard's state.
type Model struct {
	actions Actions
	now     func() time.Time
	title   string

	rows     []Row
	shown    []Row // rows after the filter
	cursor   int
	mode     mode
	filter   string
	width    int
	height   int
	connErr  error
	status   string
	confirm  pendingAction
	synced   bool
	previous mode   // the mode a confirmation or the help returns to
	focus    string // the selected VM's key: the cursor follows it as rows change
	plain    bool   // no colours (NO_COLOR, golden tests)
}

// pendingAction waits for the user's confirmation.
type pendingAction struct {
	what string
	row  Row
	run  func(context.Context, string, string) error
}

// New is the model of a dashboard titled title (e.g. the namespace), acting through actions;
// plain renders without colours.
func New(title string, actions Actions, now func() time.Time, plain bool) Model {
	return Model{actions: actions, now: now, title: title, width: 80, height: 24, plain: plain}
}

// Init starts nothing: the Source sends rows.
func (m Model) Init() tea.Cmd { return nil }

// Update handles one message; it does no I/O (actions are returned as commands).
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case RowsMsg:
		m.rows, m.synced = msg, true
		m.applyFilter()
	case ConnMsg:
		m.connErr = msg.Err
	case actionDoneMsg:
		if msg.err != nil {
			m.status = fmt.Sprintf("%s failed: %v", msg.what, msg.err)
		} else {
			m.status = msg.what + ": requested"
		}
	case tea.KeyPressMsg:
		return m.key(msg.String())
	}
	return m, nil
}

// key handles a key press in the current mode.
func (m Model) key(k string) (tea.Model, tea.Cmd) {
	if k == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter:
		return m.filterKey(k), nil
	case modeConfirm:
		if k == "y" || k == "enter" {
			p := m.confirm
			m.mode, m.status = m.previous, p.what+" "+p.row.Name+"…"
			return m, m.run(p)
		}
		m.mode, m.status = m.previous, "cancelled"
		return m, nil
	case modeHelp:
		m.mode = m.previous
		return m, nil
	}
	switch k {
	case "q", "esc":
		if m.mode == modeDetail {
			m.mode = modeList
			if m.cursor < 0 {
				m.moveTo(0)
			}
			return m, nil
		}
		return m, tea.Quit
	case "up", "k":
		m.moveTo(m.cursor - 1)
	case "down", "j":
		m.moveTo(m.cursor + 1)
	case "enter":
		if _, ok := m.selected(); ok {
			m.mode = modeDetail
		}
	case "?":
		m.previous, m.mode = m.mode, modeHelp
	case "/":
		m.mode = modeFilter
	default:
		return m.action(k)
	}
	return m, nil
}

// filterKey edits the filter; enter or esc leaves filter mode (esc also clears it).
func (m Model) filterKey(k string) Model {
	switch k {
	case "enter":
		m.mode = modeList
	case "esc":
		m.filter, m.mode = "", modeList
	case "backspace":
		if m.filter != "" {
			m.filter = m.filter[:len(m.filter)-1]
		}
	default:
		if len(k) == 1 {
			m.filter += k
		} else if k == "space" {
			m.filter += " "
		}
	}
	m.applyFilter()
	return m
}

// action maps s (start/stop), r (restart), p (pause/unpause) and c (console) to the selected VM;
// stopping and restarting ask first.
func (m Model) action(k string) (tea.Model, tea.Cmd) {
	row, ok := m.selected()
	if !ok {
		return m, nil
	}
	var p pendingAction
	switch k {
	case "s":
		if row.Running {
			p = pendingAction{what: "stop", row: row, run: m.actions.Stop}
		} else {
			return m, m.run(pendingAction{what: "start", row: row, run: m.actions.Start})
		}
	case "r":
		p = pendingAction{what: "restart", row: row, run: m.actions.Restart}
	case "p":
		if row.Status == "Paused" {
			return m, m.run(pendingAction{what: "unpause", row: row, run: m.actions.Unpause})
		}
		return m, m.run(pendingAction{what: "pause", row: row, run: m.actions.Pause})
	case "c":
		if row.Phase != "Running" {
			m.status = row.Name + " is not running: start it first (s)"
			return m, nil
		}
		cmd := m.actions.Console(row.Namespace, row.Name)
		return m, tea.ExecProcess(cmd, func(err error) tea.Msg { return actionDoneMsg{what: "console of " + row.Name, err: err} })
	default:
		return m, nil
	}
	m.previous, m.mode, m.confirm = m.mode, modeConfirm, p
	return m, nil
}

// run is the command that carries out p.
func (m Model) run(p pendingAction) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return actionDoneMsg{what: p.what + " " + p.row.Name, err: p.run(ctx, p.row.Namespace, p.row.Name)}
	}
}

// applyFilter recomputes the shown rows and keeps the cursor on the focused VM.
func (m *Model) applyFilter() {
	shown := make([]Row, 0, len(m.rows))
	for _, r := range m.rows {
		if r.matches(m.filter) {
			shown = append(shown, r)
		}
	}
	m.shown = shown
	for i, r := range shown {
		if r.Key() == m.focus {
			m.cursor = i
			return
		}
	}
	if m.mode == modeDetail || m.mode == modeConfirm {
		m.cursor = -1 // the VM in view is gone: say so, and act on no other one
		return
	}
	m.moveTo(m.cursor)
}

// moveTo puts the cursor on row i (clamped) and focuses it.
func (m *Model) moveTo(i int) {
	m.cursor = max(0, min(i, len(m.shown)-1))
	if row, ok := m.selected(); ok {
		m.focus = row.Key()
	}
}

func (m Model) selected() (Row, bool) {
	if m.cursor < 0 || m.cursor >= len(m.shown) {
		return Row{}, false
	}
	return m.shown[m.cursor], true
}

package dashboard

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
)

// Watcher is the Source as the model drives it; its methods are called from commands only.
type Watcher interface {
	// Watch replaces the list watch with one of namespace ("" for all).
	Watch(namespace string)
	// WatchEvents replaces the events watch with one for namespace/name (name "" ends it).
	WatchEvents(namespace, name string)
}

// tickMsg redraws the ages once a second.
type tickMsg time.Time

type mode int

const (
	modeList mode = iota
	modeDetail
	modeHelp
	modeConfirm
	modeFilter
	modeCommand
)

// Model is the dashboard's state.
type Model struct {
	actions Actions
	watcher Watcher
	now     func() time.Time
	plain   bool // no colours (NO_COLOR, golden tests)

	namespace string // "" for all
	kind      Kind
	lists     [3][]Row // by Kind
	synced    bool
	connErr   error
	events    EventsMsg // of the object in the detail view

	shown    []Row // the kind's rows after the filter, sorted
	cursor   int
	focus    string // the selected row's key: the cursor follows it as rows change
	filter   string
	sortBy   sortColumn
	sortDesc bool

	mode     mode
	previous mode // the mode a confirmation, the help or a command returns to
	command  string
	confirm  pendingAction
	status   string
	inFlight int        // actions running
	follow   *following // the last action, until the list shows its outcome
	spin     spinner.Model
	help     help.Model
	width    int
	height   int
}

// New is the model of a dashboard of namespace ("" for all), acting through actions and watching
// through watcher; plain renders without colours.
func New(namespace string, actions Actions, watcher Watcher, now func() time.Time, plain bool) Model {
	m := Model{actions: actions, watcher: watcher, now: now, namespace: namespace, plain: plain, width: 80, height: 24,
		spin: spinner.New(spinner.WithSpinner(spinner.MiniDot)), help: help.New()}
	m.help.SetWidth(m.width)
	m.setStyles(true)
	return m
}

// Init starts the watch, the clock and asks the terminal for its background (light or dark).
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.watch(), m.tick(), tea.RequestBackgroundColor)
}

func (m Model) watch() tea.Cmd {
	w, ns := m.watcher, m.namespace
	return func() tea.Msg { w.Watch(ns); return nil }
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Update handles one message; it does no I/O (watches and actions are returned as commands).
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
	case tea.BackgroundColorMsg:
		m.setStyles(msg.IsDark())
	case tickMsg:
		return m, m.tick()
	case spinner.TickMsg:
		if !m.busy() {
			return m, nil // stop ticking
		}
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case SnapshotMsg:
		if msg.Namespace != m.namespace {
			return m, nil // a watch replaced since
		}
		m.lists, m.synced = [3][]Row{KindVM: msg.VMs, KindVMI: msg.VMIs, KindVMIRS: msg.ReplicaSets}, true
		m.applyFilter()
		m.checkFollow()
	case EventsMsg:
		m.events = msg
	case ConnMsg:
		m.connErr = msg.Err
	case actionDoneMsg:
		return m.actionDone(msg)
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// setStyles picks the help's colours for the terminal's background.
func (m *Model) setStyles(dark bool) {
	if m.plain {
		m.help.Styles = help.Styles{}
		return
	}
	m.help.Styles = help.DefaultStyles(dark)
}

// key handles a key press in the current mode.
func (m Model) key(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if key.Matches(msg, keys.Quit) {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter:
		return m.filterKey(msg), nil
	case modeCommand:
		return m.commandKey(msg)
	case modeConfirm:
		if s := msg.String(); s == "y" || s == "enter" {
			p := m.confirm
			m.mode = m.previous
			return m.start(p)
		}
		m.mode, m.status = m.previous, "cancelled"
		return m, nil
	case modeHelp:
		m.mode = m.previous
		return m, nil
	}
	switch {
	case key.Matches(msg, keys.Back):
		if m.mode == modeDetail {
			return m.leaveDetail()
		}
		if msg.String() == "esc" && m.filter != "" { // esc first clears the filter, as in k9s
			m.filter = ""
			m.applyFilter()
			return m, nil
		}
		return m, tea.Quit
	case key.Matches(msg, keys.Up):
		m.moveTo(m.cursor - 1)
	case key.Matches(msg, keys.Down):
		m.moveTo(m.cursor + 1)
	case key.Matches(msg, keys.Top):
		m.moveTo(0)
	case key.Matches(msg, keys.Bottom):
		m.moveTo(len(m.shown) - 1)
	case key.Matches(msg, keys.Detail):
		return m.enterDetail()
	case key.Matches(msg, keys.Help):
		m.previous, m.mode = m.mode, modeHelp
	case key.Matches(msg, keys.Filter) && m.mode == modeList:
		m.mode = modeFilter
	case key.Matches(msg, keys.Command):
		m.previous, m.mode, m.command = m.mode, modeCommand, ""
	default:
		if col, ok := sortKeys[msg.String()]; ok && m.mode == modeList {
			m.sortDesc = col == m.sortBy && !m.sortDesc
			m.sortBy = col
			m.applyFilter()
			return m, nil
		}
		return m.action(msg)
	}
	return m, nil
}

func (m Model) enterDetail() (tea.Model, tea.Cmd) {
	row, ok := m.selected()
	if !ok {
		return m, nil
	}
	m.mode, m.events = modeDetail, EventsMsg{}
	w := m.watcher
	return m, func() tea.Msg { w.WatchEvents(row.Namespace, row.Name); return nil }
}

func (m Model) leaveDetail() (tea.Model, tea.Cmd) {
	m.mode = modeList
	if m.cursor < 0 {
		m.moveTo(0)
	}
	w := m.watcher
	return m, func() tea.Msg { w.WatchEvents("", ""); return nil }
}

// filterKey edits the filter; enter or esc leaves filter mode (esc also clears it).
func (m Model) filterKey(msg tea.KeyPressMsg) Model {
	m.filter, m.mode = edit(m.filter, m.mode, msg)
	if msg.String() == "esc" {
		m.filter = ""
	}
	m.applyFilter()
	return m
}

// commandKey edits the `:` command line and runs it on enter.
func (m Model) commandKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if msg.String() == "enter" {
		m.mode = m.previous
		if m.mode == modeDetail {
			m.mode = modeList // a command changes what the list shows
		}
		return m.runCommand(m.command)
	}
	m.command, m.mode = edit(m.command, modeCommand, msg)
	if m.mode != modeCommand { // esc
		m.mode = m.previous
	}
	return m, nil
}

// edit applies a key to a one-line input: printable keys and space append, backspace deletes,
// enter and esc end it (back to the list).
func edit(line string, md mode, msg tea.KeyPressMsg) (string, mode) {
	switch k := msg.String(); k {
	case "enter", "esc":
		return line, modeList
	case "backspace":
		if r := []rune(line); len(r) > 0 {
			line = string(r[:len(r)-1])
		}
	case "space":
		line += " "
	default:
		line += msg.Text
	}
	return line, md
}

// runCommand carries out a `:` command: a kind to list, a namespace to watch, or quit.
func (m Model) runCommand(line string) (tea.Model, tea.Cmd) {
	verb, arg := parseCommand(line)
	if kind, ok := commands[verb]; ok {
		m.kind, m.cursor, m.focus = kind, 0, ""
		m.applyFilter()
		return m, nil
	}
	switch verb {
	case "":
		return m, nil
	case "q", "q!", "quit":
		return m, tea.Quit
	case "help":
		m.previous, m.mode = modeList, modeHelp
		return m, nil
	case "ns", "namespace":
		if arg == "" {
			m.status = "usage: :ns NAME (or :ns all)"
			return m, nil
		}
		if allNamespaces[arg] {
			arg = ""
		}
		m.namespace, m.synced, m.lists, m.shown, m.cursor, m.focus = arg, false, [3][]Row{}, nil, 0, ""
		m.status = ""
		return m, m.watch()
	}
	m.status = fmt.Sprintf("unknown command %q: try :vm, :vmi, :vmirs, :ns NAME, :ns all, :q", line)
	return m, nil
}

// applyFilter recomputes the shown rows of the current kind and keeps the cursor on the focused row.
func (m *Model) applyFilter() {
	rows := m.lists[m.kind]
	shown := make([]Row, 0, len(rows))
	for _, r := range rows {
		if r.matches(m.filter) {
			shown = append(shown, r)
		}
	}
	if m.sortBy != sortByName || m.sortDesc { // rows arrive sorted by name
		sortRows(shown, m.sortBy, m.sortDesc)
	}
	m.shown = shown
	for i, r := range shown {
		if r.Key() == m.focus {
			m.cursor = i
			return
		}
	}
	if m.focus != "" && (m.mode == modeDetail || m.mode == modeConfirm) {
		m.cursor = -1 // the object in view is gone: say so, and act on no other one
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

// title names what is watched.
func (m Model) title() string {
	if m.namespace == "" {
		return "all namespaces"
	}
	return "namespace " + m.namespace
}

package dashboard

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
)

// Watcher is the Source as the model drives it; its methods are called from commands only, which
// run in any order: gen, increasing with each call the model makes, lets the Watcher ignore a
// request older than one it has already carried out.
type Watcher interface {
	// Watch replaces the list watch with one of namespace ("" for all).
	Watch(gen int, namespace string)
	// WatchEvents replaces the events watch with one for the objects named names in namespace (none:
	// it ends); EventsMsg.Key is namespace/names[0].
	WatchEvents(gen int, namespace string, names ...string)
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
	modeExec   // the prompt of a command to run in a guest (exec.go)
	modeOutput // a command's output, until any key
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
	denied    bool      // connErr is a refusal, not a lost connection
	events    EventsMsg // of the object in the detail view

	shown    []Row // the kind's rows after the filter, sorted
	cursor   int
	focus    string // the selected row's key: the cursor follows it as rows change
	filter   string
	sortBy   sortColumn
	sortDesc bool

	gen      int // the last Watcher call's generation
	mode     mode
	previous mode // the mode a confirmation, the help or a command returns to
	command  string
	execRow  Row      // the guest a command is asked for (modeExec)
	execLine string   // the command being typed
	output   []string // the last command's output (modeOutput)
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
	m := Model{actions: actions, watcher: watcher, now: now, namespace: namespace, plain: plain, width: 80, height: 24, gen: 1,
		spin: spinner.New(spinner.WithSpinner(spinner.MiniDot)), help: help.New()}
	m.help.SetWidth(m.width)
	m.setStyles(true)
	return m
}

// Init starts the watch, the clock and asks the terminal for its background (light or dark).
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.watch(1), m.tick(), tea.RequestBackgroundColor)
}

// watch is the command that (re)starts the list watch; m.gen must already count it.
func (m Model) watch(gen int) tea.Cmd {
	w, ns := m.watcher, m.namespace
	return func() tea.Msg { w.Watch(gen, ns); return nil }
}

// watchEvents is the command that points the events watch at row (the zero Row ends it).
func (m *Model) watchEvents(row Row) tea.Cmd {
	m.gen++
	w, gen, names := m.watcher, m.gen, []string(nil)
	if row.Name != "" {
		names = append(names, row.Name)
		if row.vmi != nil && row.vmi.Status.LauncherPod != "" {
			names = append(names, row.vmi.Status.LauncherPod)
		}
	}
	return func() tea.Msg { w.WatchEvents(gen, row.Namespace, names...); return nil }
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
		m.connErr, m.denied = msg.Err, msg.Denied
	case actionDoneMsg:
		return m.actionDone(msg)
	case execDoneMsg:
		return m.execDone(msg)
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
		return m.confirmKey(msg)
	case modeExec:
		return m.execKey(msg)
	case modeHelp, modeOutput:
		m.mode = m.previous
		return m, nil
	}
	switch {
	case key.Matches(msg, keys.Back):
		switch {
		case m.mode == modeDetail:
			return m.leaveDetail()
		case m.filter != "": // esc or q first clears the filter
			m.filter = ""
			m.applyFilter()
		case msg.String() == "q":
			return m, tea.Quit
		}
	case m.mode == modeList && key.Matches(msg, keys.Up):
		m.moveTo(m.cursor - 1)
	case m.mode == modeList && key.Matches(msg, keys.Down):
		m.moveTo(m.cursor + 1)
	case m.mode == modeList && key.Matches(msg, keys.Top):
		m.moveTo(0)
	case m.mode == modeList && key.Matches(msg, keys.Bottom):
		m.moveTo(len(m.shown) - 1)
	case m.mode == modeList && key.Matches(msg, keys.Detail):
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

// confirmKey carries out the pending action on y or enter, on the object as it is now (or not at
// all when it is gone); any other key cancels.
func (m Model) confirmKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	m.mode = m.previous
	if s := msg.String(); s != "y" && s != "enter" {
		m.status = "cancelled"
		return m, nil
	}
	p := m.confirm
	row, ok := m.find(p.row.Kind, p.row.Key())
	if !ok {
		m.status = p.row.Name + " is gone"
		return m, nil
	}
	p.row = row
	return m.start(p)
}

func (m Model) enterDetail() (tea.Model, tea.Cmd) {
	row, ok := m.selected()
	if !ok {
		return m, nil
	}
	m.mode, m.events = modeDetail, EventsMsg{}
	return m, m.watchEvents(row)
}

func (m Model) leaveDetail() (tea.Model, tea.Cmd) {
	m.mode = modeList
	m.applyFilter()
	return m, m.watchEvents(Row{})
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
		var stopEvents tea.Cmd
		if m.mode == modeDetail { // a command changes what the list shows
			m.mode, stopEvents = modeList, m.watchEvents(Row{})
		}
		next, cmd := m.runCommand(m.command)
		return next, tea.Batch(stopEvents, cmd)
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
		m.status, m.follow, m.gen = "", nil, m.gen+1
		return m, m.watch(m.gen)
	}
	m.status = fmt.Sprintf("unknown command %q; the commands: %s", line, commandsUsage)
	return m, nil
}

// applyFilter recomputes the shown rows of the current kind and keeps the cursor on the focused
// row; over the detail view the focus stays on its object even when the filter hides it.
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
	if m.inDetail() {
		m.cursor = max(0, min(m.cursor, len(m.shown)-1))
		return
	}
	m.moveTo(m.cursor)
}

// inDetail reports the detail view shown, or under the help, a confirmation or the command line.
func (m Model) inDetail() bool {
	return m.mode == modeDetail || (m.mode != modeList && m.mode != modeFilter && m.previous == modeDetail)
}

// moveTo puts the cursor on row i (clamped) and focuses it.
func (m *Model) moveTo(i int) {
	m.cursor = max(0, min(i, len(m.shown)-1))
	if row, ok := m.selected(); ok {
		m.focus = row.Key()
	}
}

// selected is the row under the cursor.
func (m Model) selected() (Row, bool) {
	if m.cursor < 0 || m.cursor >= len(m.shown) {
		return Row{}, false
	}
	return m.shown[m.cursor], true
}

// target is the row actions apply to: the detail view's object (filtered out or not), else the
// row under the cursor.
func (m Model) target() (Row, bool) {
	if m.inDetail() {
		return m.find(m.kind, m.focus)
	}
	return m.selected()
}

// find is the row of kind with key, from the latest snapshot.
func (m Model) find(kind Kind, key string) (Row, bool) {
	for _, r := range m.lists[kind] {
		if r.Key() == key {
			return r, true
		}
	}
	return Row{}, false
}

// title names what is watched.
func (m Model) title() string {
	if m.namespace == "" {
		return "all namespaces"
	}
	return "namespace " + m.namespace
}

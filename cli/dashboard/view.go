package dashboard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// style colours s unless the model is plain. Colours are the terminal's own ANSI ones, so its
// theme (light or dark) decides how they look.
func (m Model) style(color string, bold bool, s string) string {
	if m.plain {
		return s
	}
	st := lipgloss.NewStyle().Bold(bold)
	if color != "" {
		st = st.Foreground(lipgloss.Color(color))
	}
	return st.Render(s)
}

// statusColor: green running, yellow on the way, red blocked, grey stopped.
func statusColor(status string) string {
	switch status {
	case "Running", "Succeeded":
		return "2"
	case "Stopped", "Unknown":
		return "8"
	case "Starting", "Stopping", "Provisioning", "Migrating", "Paused", "Terminating", "WaitingForVolumeBinding",
		"Pending", "Scheduling", "Scheduled":
		return "3"
	default:
		return "1"
	}
}

// View renders the current mode; it needs no terminal. The body gets the lines the header and
// footer leave.
func (m Model) View() tea.View {
	header, footer := m.header(), m.footer()
	room := max(3, m.height-strings.Count(header, "\n")-strings.Count(footer, "\n")-2)
	shown := m.mode
	if shown == modeConfirm || shown == modeCommand || shown == modeExec {
		shown = m.previous
	}
	var body string
	switch shown {
	case modeHelp:
		body = m.helpView()
	case modeOutput:
		body = m.outputView(room)
	case modeDetail:
		body = m.detailView(room)
	default:
		body = m.listView(room)
	}
	v := tea.NewView(header + "\n" + body + "\n" + footer)
	v.AltScreen = true
	return v
}

func (m Model) header() string {
	h := m.style("6", true, "virtctl dashboard") + "  " + m.kind.String() + " · " + m.title()
	switch {
	case m.connErr != nil && m.denied: // on its own lines: the error says why, and runs long
		h += "\n" + m.style("1", true, m.wrap("NOT ALLOWED (retrying): "+m.connErr.Error(), 0))
	case m.connErr != nil:
		h += "\n" + m.style("1", true, m.wrap("DISCONNECTED (retrying): "+m.connErr.Error(), 0))
	case !m.synced:
		h += "  loading…"
	default:
		h += fmt.Sprintf("  %d", len(m.lists[m.kind]))
		if m.filter != "" {
			h += fmt.Sprintf(" (%d shown)", len(m.shown))
		}
	}
	return h
}

func (m Model) footer() string {
	switch m.mode {
	case modeConfirm:
		return m.style("3", true, m.confirmQuestion()+" (y/n)")
	case modeFilter:
		return "/" + m.filter + "▏ (enter: keep, esc: clear)"
	case modeCommand:
		return ":" + m.command + "▏ (" + commandsUsage + "; enter: run, esc: cancel)"
	case modeExec:
		return m.execRow.Name + "$ " + m.execLine + "▏ (sh -c in the guest, through its agent; enter: run, esc: cancel)"
	case modeOutput:
		return m.status + "\n(any key: back)"
	}
	line := ""
	if m.status != "" {
		if m.busy() {
			line = m.spin.View() + " "
		}
		line += m.status + "\n"
	}
	if m.mode == modeDetail {
		return line + m.help.ShortHelpView(keys.detailHelp())
	}
	return line + m.help.ShortHelpView(keys.ShortHelp())
}

func (m Model) confirmQuestion() string {
	p := m.confirm
	what := fmt.Sprintf("%s %s/%s", p.act, p.row.Namespace, p.row.Name)
	switch p.act {
	case ActForceStop:
		what += " without waiting for the guest to shut down"
	case ActDelete:
		what = fmt.Sprintf("delete %s %s/%s", p.row.Kind.Singular(), p.row.Namespace, p.row.Name)
	}
	return what + "?"
}

// column is one column of a list: its title, width (0: the rest of the line) and cell.
type column struct {
	title string
	width int
	sort  sortColumn
	cell  func(m Model, r Row) string
}

var (
	colName      = column{"NAME", 0, sortByName, func(_ Model, r Row) string { return r.Name }}
	colNamespace = column{"NAMESPACE", 16, -1, func(_ Model, r Row) string { return r.Namespace }}
	colStatus    = column{"STATUS", 18, sortByStatus, func(_ Model, r Row) string { return r.Status }}
	colReady     = column{"READY", 5, -1, func(_ Model, r Row) string { return strconv.FormatBool(r.Ready) }}
	colNode      = column{"NODE", 10, sortByNode, func(_ Model, r Row) string { return r.Node }}
	colIP        = column{"IP", 15, -1, func(_ Model, r Row) string { return r.IP }}
	colAge       = column{"AGE", 4, sortByAge, func(m Model, r Row) string { return age(r.Created, m.now()) }}
	colRSReady   = column{"READY", 7, sortByStatus, func(_ Model, r Row) string { return r.Status }}
	colCurrent   = column{"CURRENT", 7, -1, func(_ Model, r Row) string {
		if r.rs == nil {
			return "-"
		}
		return strconv.Itoa(int(r.rs.Status.Replicas))
	}}
)

// columns are the kind's columns that fit the width: the namespace column only when all
// namespaces are shown; IP, then node, left out when the terminal is too narrow for them.
func (m Model) columns() []column {
	var cols []column
	if m.kind == KindVMIRS {
		cols = []column{colName, colNamespace, colRSReady, colCurrent, colAge}
	} else {
		cols = []column{colName, colNamespace, colStatus, colReady, colNode, colIP, colAge}
	}
	if m.namespace != "" {
		cols = slices.DeleteFunc(cols, func(c column) bool { return c.title == colNamespace.title })
	}
	for _, drop := range []string{colIP.title, colNode.title} { // too narrow: these go first
		if m.width-2-widthOf(cols) >= minName {
			break
		}
		cols = slices.DeleteFunc(cols, func(c column) bool { return c.title == drop })
	}
	return cols
}

// minName is the narrowest the name column gets.
const minName = 12

// widthOf is what the columns other than the name take, with their separators.
func widthOf(cols []column) int {
	w := 0
	for _, c := range cols[1:] {
		w += c.width + 1
	}
	return w
}

// listView is the table: the name column takes what the others leave of the width (12-40).
func (m Model) listView(room int) string {
	cols := m.columns()
	nameWidth := max(minName, min(40, m.width-2-widthOf(cols)-1))
	cell := func(c column, s string) string {
		w := c.width
		if w == 0 {
			w = nameWidth
		}
		return fmt.Sprintf("%-*s", w, cut(s, w))
	}
	head := make([]string, len(cols))
	for i, c := range cols {
		t := c.title
		if c.sort == m.sortBy && (m.sortBy != sortByName || m.sortDesc) {
			t += map[bool]string{false: "↑", true: "↓"}[m.sortDesc]
		}
		head[i] = cell(c, t)
	}
	lines := []string{m.style("", true, "  "+strings.TrimRight(strings.Join(head, " "), " "))}
	visible := max(1, room-1)
	first := max(0, m.cursor-visible+1)
	for i := first; i < len(m.shown) && i < first+visible; i++ {
		r := m.shown[i]
		cells := make([]string, len(cols))
		for j, c := range cols {
			cells[j] = cell(c, c.cell(m, r))
			if c.sort == sortByStatus {
				cells[j] = m.style(statusColor(r.Status), false, cells[j])
			}
		}
		prefix := "  "
		if i == m.cursor {
			prefix = m.style("", true, "> ")
		}
		lines = append(lines, prefix+strings.TrimRight(strings.Join(cells, " "), " "))
	}
	if len(m.shown) == 0 && m.synced {
		none := "  no " + m.kind.String()
		if m.filter != "" {
			none += " match the filter " + strconv.Quote(m.filter) + " (esc clears it)"
		}
		lines = append(lines, none)
	}
	return strings.Join(lines, "\n")
}

func (m Model) helpView() string {
	h := m.help
	h.SetWidth(m.width)
	return m.style("", true, "keys") + "\n" + h.FullHelpView(keys.FullHelp()) + "\n\n" + notesHelp + "\n\nany key: back"
}

func cut(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

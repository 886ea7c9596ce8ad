package dashboard

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// keysHelp is the help bar and the help view's content.
var keysHelp = [][2]string{
	{"↑/↓ j/k", "move"}, {"enter", "details"}, {"/", "filter"}, {"s", "start / stop"}, {"r", "restart"},
	{"p", "pause / unpause"}, {"c", "console (leave with Ctrl+])"}, {"?", "help"}, {"q/esc", "back / quit"},
}

// style colours s unless the model is plain.
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
	case "Running":
		return "2"
	case "Stopped", "Unknown":
		return "8"
	case "Starting", "Stopping", "Provisioning", "Migrating", "Paused", "Terminating", "WaitingForVolumeBinding":
		return "3"
	default:
		return "1"
	}
}

// View renders the current mode; it needs no terminal.
func (m Model) View() tea.View {
	var body string
	switch m.mode {
	case modeHelp:
		body = m.helpView()
	case modeDetail:
		body = m.detailView()
	default:
		body = m.listView()
	}
	v := tea.NewView(m.header() + "\n" + body + "\n" + m.footer())
	v.AltScreen = true
	return v
}

func (m Model) header() string {
	h := m.style("6", true, "virtctl dashboard") + "  " + m.title
	switch {
	case m.connErr != nil:
		h += "  " + m.style("1", true, "DISCONNECTED: "+m.connErr.Error()+" (retrying)")
	case !m.synced:
		h += "  loading…"
	default:
		h += fmt.Sprintf("  %d VMs", len(m.rows))
	}
	return h
}

func (m Model) footer() string {
	var line string
	switch m.mode {
	case modeConfirm:
		line = m.style("3", true, fmt.Sprintf("%s %s/%s? (y/n)", m.confirm.what, m.confirm.row.Namespace, m.confirm.row.Name))
	case modeFilter:
		line = "/" + m.filter + "▏ (enter: keep, esc: clear)"
	default:
		if m.status != "" {
			line = m.status + "  "
		}
		line += m.style("8", false, "? help  / filter  enter details  s start/stop  c console  q quit")
	}
	return line
}

// columns: name, namespace, status, ready, node, IP, age.
func (m Model) listView() string {
	lines := []string{m.style("", true, fmt.Sprintf("  %-24s %-16s %-18s %-5s %-10s %-15s %s", "NAME", "NAMESPACE", "STATUS", "READY", "NODE", "IP", "AGE"))}
	if m.filter != "" {
		lines[0] += "   filter: " + m.filter
	}
	visible := max(1, m.height-4)
	first := max(0, m.cursor-visible+1)
	for i := first; i < len(m.shown) && i < first+visible; i++ {
		r := m.shown[i]
		ready := "false"
		if r.Ready {
			ready = "true"
		}
		line := fmt.Sprintf("%-24s %-16s %s %-5s %-10s %-15s %s", cut(r.Name, 24), cut(r.Namespace, 16),
			m.style(statusColor(r.Status), false, fmt.Sprintf("%-18s", cut(r.Status, 18))), ready, cut(r.Node, 10), cut(r.IP, 15), age(r.Created, m.now()))
		if i == m.cursor {
			line = m.style("", true, "> ") + line
		} else {
			line = "  " + line
		}
		lines = append(lines, line)
	}
	if len(m.shown) == 0 && m.synced {
		lines = append(lines, "  no VMs"+map[bool]string{true: " match the filter", false: ""}[m.filter != ""])
	}
	return strings.Join(lines, "\n")
}

func (m Model) detailView() string {
	r, ok := m.selected()
	if !ok {
		return "the VM is gone"
	}
	phase := r.Phase
	if phase == "" {
		phase = "no instance"
	}
	lines := []string{
		m.style("", true, r.Namespace+"/"+r.Name),
		"  status:   " + m.style(statusColor(r.Status), true, r.Status),
		"  instance: " + phase,
		"  node:     " + dash(r.Node),
		"  IP:       " + dash(r.IP),
		"  age:      " + age(r.Created, m.now()),
	}
	if r.Why != "" { // wrapped to the terminal: a scheduler's message runs long
		wrapped := strings.Split(lipgloss.NewStyle().Width(max(20, m.width-9)).Render(r.Why), "\n")
		for i := range wrapped {
			wrapped[i] = strings.TrimRight(wrapped[i], " ") // Width pads every line
		}
		lines = append(lines, "", m.style("1", true, "  why: ")+strings.Join(wrapped, "\n       "))
	}
	lines = append(lines, "", m.style("8", false, "  esc back  s start/stop  r restart  p pause  c console"))
	return strings.Join(lines, "\n")
}

func (m Model) helpView() string {
	lines := []string{m.style("", true, "keys")}
	for _, k := range keysHelp {
		lines = append(lines, fmt.Sprintf("  %-10s %s", k[0], k[1]))
	}
	return strings.Join(append(lines, "", "any key: back"), "\n")
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

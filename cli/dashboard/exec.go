package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/podvirt/podvirt/internal/termsafe"
)

// A one-shot command in the selected VM's guest (x): a prompt, then the command runs through the
// guest agent (virtctl exec … -- sh -c LINE) and its output fills the body until any key.

// ExecOutcome is what a command run in a guest printed (stdout then stderr) and how it exited.
type ExecOutcome struct {
	Output    string
	ExitCode  int
	Truncated bool
}

// ExecTimeout bounds a command run from the dashboard.
const ExecTimeout = time.Minute

// maxOutputLines is how much of a command's output the dashboard keeps (its end).
const maxOutputLines = 500

// execDoneMsg ends a command run in a guest.
type execDoneMsg struct {
	row  Row
	line string
	out  ExecOutcome
	err  error
}

// execPrompt asks for a command to run in row's guest.
func (m Model) execPrompt(row Row) (tea.Model, tea.Cmd) {
	if row.Kind == KindVMIRS || row.Phase != "Running" {
		m.status = row.Name + notRunning
		return m, nil
	}
	m.previous, m.mode, m.execRow, m.execLine = m.mode, modeExec, row, ""
	return m, nil
}

// execKey edits the command line; enter runs it, esc cancels.
func (m Model) execKey(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	line, md := edit(m.execLine, modeExec, msg)
	m.execLine = line
	if md == modeExec {
		return m, nil
	}
	m.mode = m.previous
	if msg.String() != "enter" || strings.TrimSpace(line) == "" {
		return m, nil
	}
	row, actions := m.execRow, m.actions
	m.status = fmt.Sprintf("exec in %s: %s…", row.Name, line)
	m.inFlight++
	run := func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), ExecTimeout+30*time.Second)
		defer cancel()
		out, err := actions.Exec(ctx, row.Namespace, row.Name, line)
		return execDoneMsg{row: row, line: line, out: out, err: err}
	}
	return m, tea.Batch(run, m.spin.Tick)
}

// execDone shows the command's output and exit code: in the body when the list or the details are
// shown, else (the user is busy elsewhere) in the status line only.
func (m Model) execDone(msg execDoneMsg) (tea.Model, tea.Cmd) {
	m.inFlight--
	if msg.err != nil {
		m.status = fmt.Sprintf("exec in %s failed: %s", msg.row.Name, termsafe.Line(msg.err.Error()))
		return m, nil
	}
	lines := strings.Split(strings.TrimRight(termsafe.Printable(msg.out.Output), "\n"), "\n")
	if len(lines) > maxOutputLines {
		lines = lines[len(lines)-maxOutputLines:]
	}
	m.output = lines
	m.status = fmt.Sprintf("exec in %s: %s: exit code %d", msg.row.Name, msg.line, msg.out.ExitCode)
	if msg.out.Truncated {
		m.status += " (output cut)"
	}
	if m.mode == modeList || m.mode == modeDetail {
		m.previous, m.mode = m.mode, modeOutput
	}
	return m, nil
}

// outputView is the end of the last command's output that fits room lines.
func (m Model) outputView(room int) string {
	lines := m.output
	if len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	return strings.Join(lines, "\n")
}

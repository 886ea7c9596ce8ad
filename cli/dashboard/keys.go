package dashboard

import (
	"strings"

	"charm.land/bubbles/v2/key"
)

// keyMap is every binding, with the help the help bar and the help view show: the keys a k9s
// user would guess.
type keyMap struct {
	Up, Down, Top, Bottom, Detail, Back, Quit, Help, Filter, Command key.Binding
	SortName, SortStatus, SortNode, SortAge                          key.Binding
	StartStop, ForceStop, Restart, Pause, Migrate, Delete            key.Binding
	Console, VNC, Exec                                               key.Binding
}

var keys = keyMap{
	Up:         key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
	Down:       key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
	Top:        key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top")),
	Bottom:     key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom")),
	Detail:     key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "details")),
	Back:       key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc/q", "back")),
	Quit:       key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	Help:       key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Filter:     key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Command:    key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command")),
	SortName:   key.NewBinding(key.WithKeys("N"), key.WithHelp("N", "sort by name")),
	SortStatus: key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "sort by status")),
	SortNode:   key.NewBinding(key.WithKeys("O"), key.WithHelp("O", "sort by node")),
	SortAge:    key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "sort by age")),
	StartStop:  key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "start/stop")),
	ForceStop:  key.NewBinding(key.WithKeys("ctrl+k"), key.WithHelp("ctrl+k", "force stop")),
	Restart:    key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "restart")),
	Pause:      key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause/unpause")),
	Migrate:    key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "migrate")),
	Delete:     key.NewBinding(key.WithKeys("ctrl+d"), key.WithHelp("ctrl+d", "delete")),
	Console:    key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "console")),
	VNC:        key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "VNC proxy")),
	Exec:       key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "exec a command")),
}

// ShortHelp is the help bar: the keys of the list.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Help, k.Command, k.Filter, k.Detail, k.StartStop, k.Console, k.Back}
}

// detailHelp is the help bar of the detail view: its actions.
func (k keyMap) detailHelp() []key.Binding {
	return []key.Binding{k.Back, k.StartStop, k.Restart, k.Pause, k.Console, k.Exec, k.VNC, k.Migrate, k.Delete, k.Help}
}

// notesHelp follows the keys in the help view: the `:` commands and what the keys do not say.
const notesHelp = "commands  " + commandsUsage + "\nthe same sort key again reverses the order; ctrl+] leaves the console"

// commandsUsage lists the `:` commands (help, the command line, an unknown command's message).
const commandsUsage = ":vm  :vmi  :vmirs  :ns NAME  :ns all  :q"

// FullHelp is the help view, by column: moving, views, actions.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Top, k.Bottom, k.Detail, k.Back, k.Quit, k.Help},
		{k.Filter, k.Command, k.SortName, k.SortStatus, k.SortNode, k.SortAge},
		{k.StartStop, k.ForceStop, k.Restart, k.Pause, k.Migrate, k.Delete, k.Console, k.Exec, k.VNC},
	}
}

// commands are the `:` commands by the names (and aliases) they answer to.
var commands = map[string]Kind{
	"vm": KindVM, "vms": KindVM, "virtualmachine": KindVM, "virtualmachines": KindVM,
	"vmi": KindVMI, "vmis": KindVMI, "virtualmachineinstance": KindVMI, "virtualmachineinstances": KindVMI,
	"vmirs": KindVMIRS, "vmirss": KindVMIRS, "virtualmachineinstancereplicaset": KindVMIRS, "virtualmachineinstancereplicasets": KindVMIRS,
}

// allNamespaces are the arguments of `:ns` that mean every namespace.
var allNamespaces = map[string]bool{"all": true, "-A": true, "*": true}

// parseCommand splits a `:` command line into its verb and argument.
func parseCommand(line string) (verb, arg string) {
	fields := strings.Fields(line)
	switch len(fields) {
	case 0:
		return "", ""
	case 1:
		return fields[0], ""
	default:
		return fields[0], strings.Join(fields[1:], " ")
	}
}

package v1

import (
	"net/http"
	"slices"
)

// The resources whose objects have subresources, as they appear in paths and RBAC rules.
const (
	VirtualMachines         = "virtualmachines"
	VirtualMachineInstances = "virtualmachineinstances"
)

// The subresources' names.
const (
	Start       = "start"
	Stop        = "stop"
	Restart     = "restart"
	Migrate     = "migrate"
	Pause       = "pause"
	Unpause     = "unpause"
	SoftReboot  = "softreboot"
	Reset       = "reset"
	Console     = "console"
	VNC         = "vnc"
	PortForward = "portforward"
	// The guest agent's calls (KubeVirt's, but exec, which is Podvirt's own).
	GuestOSInfo    = "guestosinfo"
	UserList       = "userlist"
	FileSystemList = "filesystemlist"
	Freeze         = "freeze"
	Unfreeze       = "unfreeze"
	Exec           = "exec"
	// ExpandSpec is a VM as its instance would be made: instancetype and preference applied.
	ExpandSpec = "expand-spec"
	// ObjectGraph is the objects a VM or an instance owns or uses.
	ObjectGraph = "objectgraph"
)

// Version is the group's version call (GET /apis/subresources.kubevirt.io/v1/version): not a
// subresource of an object, open to every authenticated user.
const Version = "version"

// Subresource is one row of Table.
//
// +kubebuilder:object:generate=false
type Subresource struct {
	// Resource is the parent: VirtualMachines or VirtualMachineInstances.
	Resource string
	// Name is the subresource's name, the last element of its path.
	Name string
	// Method is the HTTP method of the call.
	Method string
	// Verb is the RBAC verb the call is authorized with, on Resource/Name in GroupName.
	Verb string
	// LongRunning streams (a websocket): neither the request timeout nor the in-flight limit applies.
	LongRunning bool
	// Params follow the name in the path (portforward's "/{port}" and "/{port}/{protocol}"); none: "".
	Params []string
}

// Kind is the parent's kind.
func (s Subresource) Kind() string {
	if s.Resource == VirtualMachines {
		return "VirtualMachine"
	}
	return "VirtualMachineInstance"
}

// Path is the call's path under /apis/GroupName/VERSION, with {namespace} and {name} to fill in,
// and params (one of s.Params) after the name.
func (s Subresource) Path(params string) string {
	return "/namespaces/{namespace}/" + s.Resource + "/{name}/" + s.Name + params
}

// Table is every subresource Podvirt serves, in discovery order: discovery, virt-api's routes and
// long-running set, the CLI's verbs and the RBAC roles (install/rbac, checked by a test) all come from
// it. It returns a new slice each time.
func Table() []Subresource {
	put := func(resource, name string) Subresource {
		return Subresource{Resource: resource, Name: name, Method: http.MethodPut, Verb: "update", Params: []string{""}}
	}
	stream := func(resource, name string, params ...string) Subresource {
		if len(params) == 0 {
			params = []string{""}
		}
		return Subresource{Resource: resource, Name: name, Method: http.MethodGet, Verb: "get", LongRunning: true, Params: params}
	}
	get := func(resource, name string) Subresource {
		return Subresource{Resource: resource, Name: name, Method: http.MethodGet, Verb: "get", Params: []string{""}}
	}
	var rows []Subresource
	rows = append(rows,
		put(VirtualMachines, Start), put(VirtualMachines, Stop), put(VirtualMachines, Restart),
		put(VirtualMachineInstances, Pause), put(VirtualMachineInstances, Unpause),
		put(VirtualMachines, Migrate), put(VirtualMachineInstances, SoftReboot), put(VirtualMachineInstances, Reset),
		get(VirtualMachineInstances, GuestOSInfo), get(VirtualMachineInstances, UserList), get(VirtualMachineInstances, FileSystemList),
		get(VirtualMachines, ExpandSpec), get(VirtualMachines, ObjectGraph), get(VirtualMachineInstances, ObjectGraph),
		put(VirtualMachineInstances, Freeze), put(VirtualMachineInstances, Unfreeze),
		// exec runs a command in the guest, as create on pods/exec does in a container; its name makes
		// it long-running in kube-apiserver too, which proxies it here.
		Subresource{Resource: VirtualMachineInstances, Name: Exec, Method: http.MethodPost, Verb: "create", LongRunning: true, Params: []string{""}})
	for _, parent := range []string{VirtualMachineInstances, VirtualMachines} {
		rows = append(rows, stream(parent, Console), stream(parent, VNC), stream(parent, PortForward, "/{port}", "/{port}/{protocol}"))
	}
	return rows
}

// LongRunningNames are the names of the long-running subresources.
func LongRunningNames() []string {
	var names []string
	for _, s := range Table() {
		if s.LongRunning && !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	return names
}

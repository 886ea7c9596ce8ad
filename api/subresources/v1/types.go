package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the subresource calls.
const GroupName = "subresources.kubevirt.io"

var (
	// SchemeGroupVersion is the group and version of this package's types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}
	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&StartOptions{}, &StopOptions{}, &RestartOptions{},
		&PauseOptions{}, &UnpauseOptions{}, &MigrateOptions{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// StartOptions is the body of a start call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type StartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// Paused starts the guest paused.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// DryRun: "All" validates without persisting.
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// StopOptions is the body of a stop call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type StopOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriod overrides the instance's terminationGracePeriodSeconds; 0 forces the stop.
	// +optional
	GracePeriod *int64 `json:"gracePeriod,omitempty"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// RestartOptions is the body of a restart call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type RestartOptions struct {
	metav1.TypeMeta `json:",inline"`
	// GracePeriodSeconds overrides the instance's terminationGracePeriodSeconds; 0 forces the stop.
	// +optional
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// PauseOptions is the body of a pause call on a VirtualMachineInstance.
//
// +kubebuilder:object:root=true
type PauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// UnpauseOptions is the body of an unpause call on a VirtualMachineInstance.
//
// +kubebuilder:object:root=true
type UnpauseOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
}

// MigrateOptions is the body of a migrate call on a VirtualMachine.
//
// +kubebuilder:object:root=true
type MigrateOptions struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	DryRun []string `json:"dryRun,omitempty"`
	// AddedNodeSelector narrows the nodes the instance may migrate to.
	// +optional
	AddedNodeSelector map[string]string `json:"addedNodeSelector,omitempty"`
}

// ExecRequest is the body of an exec call on a VirtualMachineInstance (Podvirt's own: KubeVirt has
// none): Command runs in the guest through its qemu guest agent, with Stdin as its standard input,
// and the call answers its ExecResult once it exits or TimeoutSeconds pass.
//
// +kubebuilder:object:root=true
type ExecRequest struct {
	metav1.TypeMeta `json:",inline"`
	// Command is the program and its arguments; the guest agent looks the program up in its PATH.
	Command []string `json:"command"`
	// Stdin is the command's standard input (at most MaxExecInputBytes); none: empty.
	// +optional
	Stdin []byte `json:"stdin,omitempty"`
	// TimeoutSeconds bounds the wait for the command to exit (1 to MaxExecTimeoutSeconds; 0:
	// DefaultExecTimeoutSeconds). A command still running then is left running in the guest.
	// +optional
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// ExecResult is the answer of an exec call.
//
// +kubebuilder:object:root=true
type ExecResult struct {
	metav1.TypeMeta `json:",inline"`
	// ExitCode is the command's exit code; a command ended by a signal has 128 + the signal's number
	// (as a shell reports it) and Signal set.
	ExitCode int `json:"exitCode"`
	// Signal is the number of the signal that ended the command, 0 when it exited.
	// +optional
	Signal int `json:"signal,omitempty"`
	// Stdout and Stderr are the command's output, each at most MaxExecOutputBytes.
	// +optional
	Stdout []byte `json:"stdout,omitempty"`
	// +optional
	Stderr []byte `json:"stderr,omitempty"`
	// StdoutTruncated and StderrTruncated: the stream was longer and was cut at MaxExecOutputBytes.
	// +optional
	StdoutTruncated bool `json:"stdoutTruncated,omitempty"`
	// +optional
	StderrTruncated bool `json:"stderrTruncated,omitempty"`
}

// Bounds of an exec call: its input and each output stream, and how long it may wait.
const (
	MaxExecInputBytes         = 32 << 10
	MaxExecOutputBytes        = 256 << 10
	DefaultExecTimeoutSeconds = 60
	MaxExecTimeoutSeconds     = 3600
	// MaxExecArgs and MaxExecArgBytes bound the command line.
	MaxExecArgs     = 256
	MaxExecArgBytes = 16 << 10
	// MaxExecRequestBytes bounds an ExecRequest's JSON on every hop: any valid request fits (each
	// argument byte escaped as \u00XX, stdin in base64, room for the rest).
	MaxExecRequestBytes = 6*MaxExecArgBytes + (MaxExecInputBytes+2)/3*4 + 16<<10
)

package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Probe is a periodic health check of the guest.
type Probe struct {
	ProbeHandler `json:",inline"`

	// InitialDelaySeconds to wait after the guest started before the first probe.
	// +optional
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	// TimeoutSeconds after which a probe counts as failed; defaults to 1.
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// PeriodSeconds between probes; defaults to 10.
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// SuccessThreshold is the number of successes in a row that make a failed probe pass again; defaults to 1.
	// +optional
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// FailureThreshold is the number of failures in a row that make a probe fail; defaults to 3.
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// ProbeHandler is the check a probe performs; exactly one field is set.
type ProbeHandler struct {
	// Exec runs a command in the guest through the guest agent.
	// +optional
	Exec *corev1.ExecAction `json:"exec,omitempty"`
	// GuestAgentPing checks that the guest agent answers.
	// +optional
	GuestAgentPing *GuestAgentPing `json:"guestAgentPing,omitempty"`
	// HTTPGet sends an HTTP GET to the guest.
	// +optional
	HTTPGet *corev1.HTTPGetAction `json:"httpGet,omitempty"`
	// TCPSocket opens a TCP connection to the guest.
	// +optional
	TCPSocket *corev1.TCPSocketAction `json:"tcpSocket,omitempty"`
}

// GuestAgentPing is a probe that pings the guest agent; it has no settings.
type GuestAgentPing struct{}

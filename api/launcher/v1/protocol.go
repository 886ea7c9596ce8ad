package v1

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// Command protocol, version 1: HTTP/1.1 over the unix socket CommandSocket, JSON bodies.
//
//	GET  /v1/ping       → 200 {"version":"v1"}
//	POST /v1/sync       body SyncRequest → 200 Status (define and start the domain if it is not yet);
//	                    503 while the disk containers have not written the instance's files yet
//	                    (after a few seconds' wait: ask again), 400 naming the field when a copy failed
//	POST /v1/shutdown   body ShutdownRequest → 202 (ACPI power-off; killed after the grace period)
//	POST /v1/kill       → 202 (stop the guest at once)
//	POST /v1/pause      → 200 Status
//	POST /v1/unpause    → 200 Status
//	POST /v1/reboot     → 202 (ACPI reboot: the guest reboots, the domain keeps running)
//	POST /v1/reset      → 202 (hard reset: the guest restarts at once, the domain keeps running)
//	GET  /v1/status     → 200 Status
//	GET  /v1/portforward/{port}  with "Connection: Upgrade", "Upgrade: tcp"
//	                    → 101, then the connection carries the bytes of one TCP connection to the
//	                      guest's port (declared in the VMI's interface ports or not)
//	POST /v1/migration/target  body SyncRequest → 200 Status: the launcher of a migration target
//	                    prepares the instance's files as a sync would (503/400 alike), starts a libvirt
//	                    daemon listening in MigrationDir and waits for the guest to arrive
//	                    (Status.Migration, role Target); it adopts the guest once it runs here
//	POST /v1/migrate    body MigrateRequest → 202 Status: live-migrates the running guest to the
//	                    target reached through the sockets in MigrationDir (see there);
//	                    Status.Migration (role Source, the request's uid) follows it; the same uid
//	                    again starts nothing; 409 while another runs or the guest is not running;
//	                    once it has completed the domain is gone and the launcher exits 0 with
//	                    state Migrated
//	POST /v1/migrate/cancel → 202 Status (aborts a running migration: the guest stays here)
//	PUT  /v1/node-check   NodeCheck → 204 (where to ask for the kubelet's lease; the agent only)
//	GET  /v1/guest-agent/info    → 200 virtv1.VirtualMachineInstanceGuestAgentInfo (what the qemu
//	                    guest agent reports); 409 while no guest agent is connected (Status.AgentConnected)
//	POST /v1/guest-agent/freeze  body FreezeRequest → 200 (the guest's file systems are frozen, and
//	                    thawed by the launcher after the request's timeout unless unfrozen before)
//	POST /v1/guest-agent/unfreeze → 200
//	POST /v1/guest-agent/exec    body subv1.ExecRequest → 200 subv1.ExecResult (after the command
//	                    exited), 504 when it did not exit within its timeout, 400 naming a bound
//	                    the request passes
//
// Errors: a non-2xx status with body Error. The launcher exits once the domain is gone (after it was
// started), so the Pod completes: exit code 0 after a guest shutdown, non-zero after a crash or kill.
const (
	Version      = "v1"
	PathPing     = "/v1/ping"
	PathSync     = "/v1/sync"
	PathShutdown = "/v1/shutdown"
	PathKill     = "/v1/kill"
	PathPause    = "/v1/pause"
	PathUnpause  = "/v1/unpause"
	PathStatus   = "/v1/status"
	PathReboot   = "/v1/reboot"
	PathReset    = "/v1/reset"
	// PathMigrationTarget, PathMigrate and PathMigrateCancel drive a live migration (see above).
	PathMigrationTarget = "/v1/migration/target"
	PathMigrate         = "/v1/migrate"
	PathMigrateCancel   = "/v1/migrate/cancel"
	// PathNodeCheck sets where the launcher asks for its kubelet's lease (NodeCheck), for a guest
	// synced without it or with another (Status.NodeCheck); only the agent's calls count.
	PathNodeCheck = "/v1/node-check"
	// The guest agent's calls (see above): libvirt talks to the agent, the launcher to libvirt.
	PathGuestAgentInfo = "/v1/guest-agent/info"
	PathFreeze         = "/v1/guest-agent/freeze"
	PathUnfreeze       = "/v1/guest-agent/unfreeze"
	PathExec           = "/v1/guest-agent/exec"
	// PathPortForward is the prefix of the port-forward path: PathPortForward + "{port}".
	PathPortForward = "/v1/portforward/"
	// UpgradeTCP is the Upgrade header value of a port-forward request.
	UpgradeTCP = "tcp"
)

// SyncRequest carries the VirtualMachineInstance (kubevirt.io/v1 JSON) the launcher runs.
type SyncRequest struct {
	// VMI is the whole VirtualMachineInstance object as JSON.
	VMI []byte `json:"vmi"`
	// Emulation forces software emulation (TCG) instead of KVM.
	Emulation bool `json:"emulation"`
	// QemuCapabilities are libvirt's cache files of qemu's capabilities (file name → content) as
	// probed on this node with the launcher image, so the launcher need not probe qemu itself.
	QemuCapabilities map[string][]byte `json:"qemuCapabilities,omitempty"`
	// NodeCheck is where to ask whether the node's kubelet is alive while the agent is silent
	// (kubeletlease.go); nil: fence on the agent's silence alone.
	NodeCheck *NodeCheck `json:"nodeCheck,omitempty"`
}

// FreezeRequest freezes the guest's file systems (the freeze subresource).
type FreezeRequest struct {
	// UnfreezeTimeoutSeconds after which the launcher thaws them itself (1 to
	// MaxUnfreezeTimeoutSeconds; 0: DefaultUnfreezeTimeoutSeconds).
	UnfreezeTimeoutSeconds int64 `json:"unfreezeTimeoutSeconds,omitempty"`
}

// Bounds of a freeze: KubeVirt's default unfreeze timeout, and at most an hour.
const (
	DefaultUnfreezeTimeoutSeconds = 5 * 60
	MaxUnfreezeTimeoutSeconds     = 60 * 60
)

// FreezeRequestFor is the FreezeRequest of the freeze subresource's unfreezeTimeout (KubeVirt's body;
// nil or 0: DefaultUnfreezeTimeoutSeconds), or the bound it passes, named.
func FreezeRequestFor(t *metav1.Duration) (FreezeRequest, error) {
	if t == nil || t.Duration == 0 {
		return FreezeRequest{}, nil
	}
	if max := MaxUnfreezeTimeoutSeconds * time.Second; t.Duration < time.Second || t.Duration > max {
		return FreezeRequest{}, fmt.Errorf("unfreezeTimeout: must be between 1s and %s (0: %s), got %s",
			max, DefaultUnfreezeTimeoutSeconds*time.Second, t.Duration)
	}
	return FreezeRequest{UnfreezeTimeoutSeconds: int64(t.Duration / time.Second)}, nil
}

// ExecGrace is how much longer than an exec's own timeout its callers wait for the launcher's answer.
const ExecGrace = 15 * time.Second

// ExecTimeout is an exec request's timeout (its TimeoutSeconds, or the default).
func ExecTimeout(req *subv1.ExecRequest) time.Duration {
	if req.TimeoutSeconds <= 0 {
		return subv1.DefaultExecTimeoutSeconds * time.Second
	}
	return time.Duration(req.TimeoutSeconds) * time.Second
}

// ShutdownRequest asks for a graceful shutdown.
type ShutdownRequest struct {
	// GracePeriodSeconds after which the guest is killed; 0 kills at once.
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
}

// MigrateRequest starts a live migration of the guest to the target launcher.
type MigrateRequest struct {
	// UID identifies the migration (the VirtualMachineInstanceMigration's): asking again for the
	// migration under way, or one that ended, answers its status and starts nothing.
	UID string `json:"uid"`
	// BandwidthMiBps caps the transfer (MiB/s); 0 is unlimited.
	BandwidthMiBps uint64 `json:"bandwidthMiBps,omitempty"`
	// ProgressTimeoutSeconds aborts the migration when the data left to send has not shrunk for
	// this long (0: MigrationProgressTimeout).
	ProgressTimeoutSeconds int64 `json:"progressTimeoutSeconds,omitempty"`
	// CompletionTimeoutPerGiBSeconds aborts the migration when it has run longer than this per GiB
	// of memory and disks to send, at least one GiB's worth (0: MigrationCompletionTimeoutPerGiB).
	CompletionTimeoutPerGiBSeconds int64 `json:"completionTimeoutPerGiBSeconds,omitempty"`
}

// A migration that stops making progress, or takes too long, is aborted by its source launcher:
// the guest runs on where it was, and the migration fails saying which bound it passed
// (KubeVirt's progressTimeout and completionTimeoutPerGiB, with KubeVirt's defaults).
const (
	MigrationProgressTimeout         = 150 * time.Second
	MigrationCompletionTimeoutPerGiB = 150 * time.Second
	// MaxMigrationTimeoutSeconds bounds both timeouts of a MigrateRequest (a day).
	MaxMigrationTimeoutSeconds = 24 * 60 * 60
)

// DomainState is the guest's state as the launcher sees it.
type DomainState string

// Domain states.
const (
	// DomainNone: no domain defined yet (waiting for sync).
	DomainNone DomainState = ""
	// DomainRunning: the guest runs.
	DomainRunning DomainState = "Running"
	// DomainPaused: the guest is paused (clock stopped).
	DomainPaused DomainState = "Paused"
	// DomainShuttingDown: an ACPI shutdown was sent; the grace period runs.
	DomainShuttingDown DomainState = "ShuttingDown"
	// DomainShutoff: the guest powered off by itself (→ VMI Succeeded).
	DomainShutoff DomainState = "Shutoff"
	// DomainCrashed: qemu died or the guest crashed (→ VMI Failed).
	DomainCrashed DomainState = "Crashed"
	// DomainMigrated: the guest moved to the migration target and runs there (the VMI goes on).
	DomainMigrated DomainState = "Migrated"
)

// Reasons in Status: why the guest is in its state. The node agent passes them on to the VMI (as the
// reason of its phase or of the Paused condition), so they are part of the contract.
const (
	// ReasonStarted: the guest was started and runs.
	ReasonStarted = "Started"
	// ReasonStartedPaused: the guest was started paused (startStrategy: Paused).
	ReasonStartedPaused = "StartedPaused"
	// ReasonPaused: the guest was paused on request.
	ReasonPaused = "PausedByUser"
	// ReasonShutdownRequested: an ACPI power-off was sent; the grace period runs.
	ReasonShutdownRequested = "ShutdownRequested"
	// ReasonGuestShutdown: the guest powered off by itself or after an ACPI request.
	ReasonGuestShutdown = "GuestShutdown"
	// ReasonGracePeriodExpired: the guest did not power off within its grace period and was stopped.
	ReasonGracePeriodExpired = "GracePeriodExpired"
	// ReasonKilled: the guest was stopped at once on request.
	ReasonKilled = "Killed"
	// ReasonQemuCrashed: qemu exited unexpectedly.
	ReasonQemuCrashed = "QemuCrashed"
	// ReasonGuestCrashed: the guest crashed (panic notifier).
	ReasonGuestCrashed = "GuestCrashed"
	// ReasonWatchdog: the guest's watchdog expired and its action (poweroff) powered the guest off.
	ReasonWatchdog = "WatchdogExpired"
	// ReasonQemuKilled: qemu was killed without a request (e.g. by a signal from outside).
	ReasonQemuKilled = "QemuKilled"
	// ReasonTerminated: the launcher was terminated (SIGTERM) while its guest ran and nobody had
	// asked to stop it: the kubelet stopped the compute container (a failed liveness probe, a node
	// shutdown) or its Pod was deleted. The guest was shut down within its grace period. While it
	// shuts down, ShuttingDown carries this reason; a shutdown or kill request then makes the stop a
	// requested one.
	ReasonTerminated = "Terminated"
	// ReasonFenced: the launcher stopped the guest itself because its node agent went silent for
	// longer than AgentSilenceLimit (see there).
	ReasonFenced = "Fenced"
	// ReasonMigrated: the guest was live-migrated away and runs on the target.
	ReasonMigrated = "Migrated"
	// ReasonMigrating: the guest is on its way to this launcher (a migration target).
	ReasonMigrating = "Migrating"
)

// HeaderVouchedUntil, on the agent's status, sync and shutdown requests, is the CLOCK_BOOTTIME
// (nanoseconds, decimal) until which the agent vouches; the launcher counts the request, at its
// start and at its end, as heard no later than that. A request sent before a node froze and served
// after it thawed then does not restart the fence timer at the thaw. A sync may outlast the vouch
// it was sent with: while one is served the agent sends status requests of its own every poll
// interval, each with its vouch. Absent: the request counts when it is served.
const HeaderVouchedUntil = "Podvirt-Vouched-Until"

// AgentSilenceLimit is how long a launcher whose guest runs waits without a status, sync or shutdown
// request from its node agent (the agent asks for the status on every pass, every few seconds, but
// only while its own heartbeat is fresh) before it destroys the guest itself. The controllers
// consider a node lost, fail its instances and start them elsewhere only once the agent's heartbeat
// is older than heartbeat.MinThreshold, which includes this limit, so a guest on a lost node has
// stopped before its replacement starts: a VM never runs twice. While its node's kubelet is known
// to renew its lease the launcher keeps its guest past the limit (Fence, kubeletlease.go).
const AgentSilenceLimit = 40 * time.Second

// Status is the launcher's report of its guest.
type Status struct {
	State DomainState `json:"state"`
	// Reason is a short CamelCase reason for the state (e.g. GuestShutdown, QemuKilled).
	Reason string `json:"reason,omitempty"`
	// Message explains the state to a human.
	Message string `json:"message,omitempty"`
	// Emulation is true when the guest runs under software emulation (TCG).
	Emulation bool `json:"emulation"`
	// Interfaces are the guest's NICs as the launcher knows them.
	Interfaces []Interface `json:"interfaces,omitempty"`
	// QemuPID is qemu's process ID inside the Pod's PID namespace.
	QemuPID int `json:"qemuPid,omitempty"`
	// AgentConnected: the qemu guest agent in the guest has its channel open.
	AgentConnected bool `json:"agentConnected,omitempty"`
	// Frozen: the guest's file systems were frozen on request and not thawed since.
	Frozen bool `json:"frozen,omitempty"`
	// GuestOSInfo is what the guest agent last said of the guest's OS (nil before it said anything).
	GuestOSInfo *virtv1.VirtualMachineInstanceGuestOSInfo `json:"guestOSInfo,omitempty"`
	// AccessCredentials is how the last propagation of the accessCredentials the guest agent
	// carries went (nil: the instance has none, or none was tried yet).
	AccessCredentials *CredentialSync `json:"accessCredentials,omitempty"`
	// Migration is the guest's live migration from or to this launcher, if any.
	Migration *MigrationStatus `json:"migration,omitempty"`
	// NodeCheck is the Digest of where the launcher asks for its kubelet's lease; "" while it
	// does not know.
	NodeCheck string `json:"nodeCheck,omitempty"`
}

// CredentialSync is the outcome of one propagation of accessCredentials through the guest agent.
type CredentialSync struct {
	// Synchronized: the guest holds every key and password of the credentials' Secrets.
	Synchronized bool `json:"synchronized"`
	// Message says what failed, or what was done.
	Message string `json:"message,omitempty"`
}

// MigrationRole is the launcher's side of a migration.
type MigrationRole string

// Migration roles.
const (
	MigrationSource MigrationRole = "Source"
	MigrationTarget MigrationRole = "Target"
)

// MigrationPhase is how far a migration has come, as one launcher sees it.
type MigrationPhase string

// Migration phases.
const (
	// MigrationRunning: the target waits for the guest / the source sends it.
	MigrationRunning MigrationPhase = "Running"
	// MigrationCompleted: the guest runs on the target.
	MigrationCompleted MigrationPhase = "Completed"
	// MigrationFailed: the migration failed or was cancelled; the guest runs on the source.
	MigrationFailed MigrationPhase = "Failed"
)

// MigrationStatus is one launcher's view of a live migration.
type MigrationStatus struct {
	// UID is the migration's (MigrateRequest.UID; empty on the target).
	UID   string         `json:"uid,omitempty"`
	Role  MigrationRole  `json:"role"`
	Phase MigrationPhase `json:"phase"`
	// Message says why it failed.
	Message   string     `json:"message,omitempty"`
	StartTime time.Time  `json:"startTime"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	// Bytes and DowntimeMillis are libvirt's figures of the completed migration (the target's).
	Bytes          uint64 `json:"bytes,omitempty"`
	DowntimeMillis uint64 `json:"downtimeMillis,omitempty"`
}

// Interface is one guest NIC.
type Interface struct {
	Name string   `json:"name"`
	MAC  string   `json:"mac,omitempty"`
	IPs  []string `json:"ips,omitempty"`
	// GuestName and GuestIPs are the NIC's name and addresses inside the guest, as its guest agent
	// last reported them (matched by MAC); empty without an agent.
	GuestName string   `json:"guestName,omitempty"`
	GuestIPs  []string `json:"guestIPs,omitempty"`
}

// Error is the body of a non-2xx reply.
type Error struct {
	Message string `json:"message"`
}

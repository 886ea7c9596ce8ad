package nodeagent

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/launcherpod"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

// Reasons the agent writes (besides the launcher's own, which it passes on).
const (
	// ReasonGuestRunning: Ready=True.
	ReasonGuestRunning = "GuestRunning"
	// ReasonGuestPaused: Ready=False while the guest is paused.
	ReasonGuestPaused = "GuestPaused"
	// ReasonShuttingDown: Ready=False while the guest shuts down.
	ReasonShuttingDown = "ShuttingDown"
	// ReasonPodNotReady: the guest runs but the launcher Pod is not Ready.
	ReasonPodNotReady = "PodNotReady"
	// ReasonDomainLost: the launcher of a running guest reports no guest.
	ReasonDomainLost = "DomainLost"
	// ReasonSyncFailed: the launcher refused or failed the sync (Synchronized=False; Failed when the
	// launcher said the instance cannot run at all).
	ReasonSyncFailed = "SyncFailed"
)

// observation is what one pass saw of an instance's launcher.
type observation struct {
	// pod is the launcher Pod.
	pod *corev1.Pod
	// live is the launcher's current status; nil when it did not answer.
	live *launcherv1.Status
	// exit is the status the launcher left when it exited (launcherv1.ExitFile); nil while it runs.
	exit *launcherv1.Status
	// syncErr is why the sync of this pass failed.
	syncErr error
	// disksPending: the launcher is still waiting for its disk containers' files.
	disksPending bool
	// accel is how guests of this Pod run (KVM or emulation).
	accel accel.Decision
	// now is the pass's time.
	now metav1.Time
}

// updateStatus sets the fields the agent owns from what it observed. It never moves an instance
// backwards and never touches a final instance except to name, from the launcher's exit file, the
// cause the controller could only call PodFailed/PodCompleted.
func updateStatus(vmi *virtv1.VirtualMachineInstance, o observation) {
	st := &vmi.Status
	if st.Phase.IsFinal() {
		if o.exit != nil {
			refineFinal(vmi, *o.exit)
		}
		return
	}
	switch {
	case o.syncErr != nil:
		setSyncFailed(vmi, o.syncErr, o.now)
	case o.disksPending:
		setDisksPending(vmi, o.pod, o.now)
	case o.live != nil:
		applyLive(vmi, *o.live, o)
	case o.exit != nil:
		applyEnd(vmi, *o.exit, o.now)
	}
}

// applyLive follows a launcher that answers.
func applyLive(vmi *virtv1.VirtualMachineInstance, live launcherv1.Status, o observation) {
	st := &vmi.Status
	switch live.State {
	case launcherv1.DomainNone:
		if st.Phase == virtv1.Running {
			vmi.Status.SetPhase(virtv1.Failed, ReasonDomainLost, o.now)
			setReady(vmi, metav1.ConditionFalse, ReasonDomainLost, "the launcher reports no guest although the guest was running")
			meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstancePaused)
		}
		return
	case launcherv1.DomainShutoff, launcherv1.DomainCrashed:
		applyEnd(vmi, live, o.now)
		return
	}
	vmi.Status.SetPhase(virtv1.Running, "", o.now)
	meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstanceSynchronized)
	setReadyFromGuest(vmi, live.State, podReady(o.pod))
	setPausedCondition(vmi, live)
	setEmulationCondition(vmi, o.accel, live.Emulation)
	setGuestAgent(vmi, live)
	st.Interfaces = interfaceStatus(vmi, live.Interfaces, o.pod)
}

// ReasonGuestAgentConnected: AgentConnected=True (KubeVirt sets the condition without a reason;
// a Condition needs one).
const ReasonGuestAgentConnected = "GuestAgentConnected"

// Reasons of AccessCredentialsSynchronized (KubeVirt's Event reasons for the same outcomes).
const (
	ReasonAccessCredentialsSyncSuccess = "AccessCredentialsSyncSuccess"
	ReasonAccessCredentialsSyncFailed  = "AccessCredentialsSyncFailed"
)

// setGuestAgent follows the guest agent: the AgentConnected condition while it is connected (none
// otherwise, as KubeVirt), the OS it reported, and whether the file systems are frozen.
func setGuestAgent(vmi *virtv1.VirtualMachineInstance, live launcherv1.Status) {
	st := &vmi.Status
	if live.AgentConnected {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineInstanceAgentConnected, Status: metav1.ConditionTrue, Reason: ReasonGuestAgentConnected,
			Message: "the qemu guest agent in the guest is connected", ObservedGeneration: vmi.Generation,
		})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, virtv1.VirtualMachineInstanceAgentConnected)
	}
	if live.GuestOSInfo != nil {
		st.GuestOSInfo = *live.GuestOSInfo
	}
	if c := live.AccessCredentials; c != nil {
		cond := metav1.Condition{Type: virtv1.VirtualMachineInstanceAccessCredentialsSynchronized, Status: metav1.ConditionTrue,
			Reason: ReasonAccessCredentialsSyncSuccess, Message: c.Message, ObservedGeneration: vmi.Generation}
		if !c.Synchronized {
			cond.Status, cond.Reason = metav1.ConditionFalse, ReasonAccessCredentialsSyncFailed
		}
		meta.SetStatusCondition(&st.Conditions, cond)
	}
	st.FSFreezeStatus = ""
	if live.Frozen {
		st.FSFreezeStatus = virtv1.FSFrozen
	}
}

// applyEnd records how the guest ended: Shutoff → Succeeded, Crashed → Failed, each with the
// launcher's reason. An exit status without a guest (the launcher ended before any sync) says nothing
// about the guest: the controller fails the instance from its Pod.
func applyEnd(vmi *virtv1.VirtualMachineInstance, end launcherv1.Status, now metav1.Time) {
	phase, reason, ok := endPhase(end)
	if !ok {
		return
	}
	vmi.Status.SetPhase(phase, reason, now)
	setReady(vmi, metav1.ConditionFalse, reason, endMessage(end))
	meta.RemoveStatusCondition(&vmi.Status.Conditions, virtv1.VirtualMachineInstancePaused)
}

// endPhase maps a final launcher state to the instance's phase and reason.
func endPhase(end launcherv1.Status) (virtv1.VirtualMachineInstancePhase, string, bool) {
	switch end.State {
	case launcherv1.DomainShutoff:
		return virtv1.Succeeded, orDefault(end.Reason, launcherv1.ReasonGuestShutdown), true
	case launcherv1.DomainCrashed:
		return virtv1.Failed, orDefault(end.Reason, launcherv1.ReasonGuestCrashed), true
	default:
		return "", "", false
	}
}

// refineFinal replaces the controller's generic PodFailed/PodCompleted with the launcher's reason
// when both agree on the outcome. The phase (and its transition time) stays as it is.
func refineFinal(vmi *virtv1.VirtualMachineInstance, end launcherv1.Status) {
	st := &vmi.Status
	if st.Reason != virtv1.ReasonPodFailed && st.Reason != virtv1.ReasonPodCompleted {
		return
	}
	phase, reason, ok := endPhase(end)
	if !ok || phase != st.Phase {
		return
	}
	st.Reason = reason
	setReady(vmi, metav1.ConditionFalse, reason, endMessage(end))
}

func endMessage(end launcherv1.Status) string {
	if end.Message != "" {
		return end.Message
	}
	if end.State == launcherv1.DomainShutoff {
		return "the guest shut down"
	}
	return "the guest stopped unexpectedly"
}

// setSyncFailed reports a failed sync: Synchronized=False, and Failed when the launcher answered 400
// (the instance as specified cannot run: retrying cannot help).
func setSyncFailed(vmi *virtv1.VirtualMachineInstance, err error, now metav1.Time) {
	msg := err.Error()
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: ReasonSyncFailed,
		Message: msg, ObservedGeneration: vmi.Generation,
	})
	if permanentSyncError(err) {
		vmi.Status.SetPhase(virtv1.Failed, ReasonSyncFailed, now)
		setReady(vmi, metav1.ConditionFalse, ReasonSyncFailed, msg)
	}
}

// disksPending reports the launcher answering that its disk containers have not written the
// instance's files yet.
func disksPending(err error) bool {
	var lerr *launcherclient.Error
	return errors.As(err, &lerr) && lerr.StatusCode == http.StatusServiceUnavailable
}

// setDisksPending fails the instance when a disk container ended without its file (killed, out
// of memory, a failure it could not record: the launcher would wait for it forever), and reports a
// disk container the kubelet cannot start (Synchronized=False with its reason); a copy that is
// merely under way writes nothing.
func setDisksPending(vmi *virtv1.VirtualMachineInstance, pod *corev1.Pod, now metav1.Time) {
	if message, failed := launcherpod.FailedContainer(pod, launcherv1.ComputeContainer, launcherv1.ConsoleLogContainer); failed {
		msg := "a disk container ended before it copied its file: " + message
		meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: ReasonSyncFailed, Message: msg, ObservedGeneration: vmi.Generation,
		})
		vmi.Status.SetPhase(virtv1.Failed, ReasonSyncFailed, now)
		setReady(vmi, metav1.ConditionFalse, ReasonSyncFailed, msg)
		return
	}
	if reason, message, stuck := launcherpod.StuckContainer(pod); stuck {
		meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
			Type: virtv1.VirtualMachineInstanceSynchronized, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: vmi.Generation,
		})
	}
}

// permanentSyncError: the launcher refused the instance itself (400 Bad Request), or a host disk
// cannot be provided, or a secondary network cannot be bridged to the guest.
func permanentSyncError(err error) bool {
	var lerr *launcherclient.Error
	var herr *hostDiskError
	var nerr *networkError
	return errors.As(err, &lerr) && lerr.StatusCode == http.StatusBadRequest || errors.As(err, &herr) || errors.As(err, &nerr)
}

func setReady(vmi *virtv1.VirtualMachineInstance, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceReady, Status: status, Reason: reason, Message: message, ObservedGeneration: vmi.Generation,
	})
}

// setReadyFromGuest: Ready=True while the guest runs in a Ready Pod (whose readiness is the
// instance's readiness probe, when it has one).
func setReadyFromGuest(vmi *virtv1.VirtualMachineInstance, state launcherv1.DomainState, podReady bool) {
	switch {
	case state == launcherv1.DomainPaused:
		setReady(vmi, metav1.ConditionFalse, ReasonGuestPaused, "the guest is paused")
	case state == launcherv1.DomainShuttingDown:
		setReady(vmi, metav1.ConditionFalse, ReasonShuttingDown, "the guest is shutting down")
	case !podReady && vmi.Spec.ReadinessProbe != nil:
		setReady(vmi, metav1.ConditionFalse, ReasonPodNotReady, "the guest runs; its readiness probe has not passed")
	case !podReady:
		setReady(vmi, metav1.ConditionFalse, ReasonPodNotReady, "the guest runs but the launcher Pod is not Ready")
	default:
		setReady(vmi, metav1.ConditionTrue, ReasonGuestRunning, "the guest is running")
	}
}

// setPausedCondition: Paused=True with the launcher's reason while the guest is paused; no condition
// otherwise (as KubeVirt).
func setPausedCondition(vmi *virtv1.VirtualMachineInstance, live launcherv1.Status) {
	if live.State != launcherv1.DomainPaused {
		meta.RemoveStatusCondition(&vmi.Status.Conditions, virtv1.VirtualMachineInstancePaused)
		return
	}
	reason, msg := orDefault(live.Reason, launcherv1.ReasonPaused), "the guest is paused"
	if reason == launcherv1.ReasonStartedPaused {
		msg = "the guest was started paused (startStrategy: Paused)"
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstancePaused, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: vmi.Generation,
	})
}

// setEmulationCondition: SoftwareEmulation=True when the guest runs under emulation (as decided, or
// as the launcher reports), with a message saying it is slow.
func setEmulationCondition(vmi *virtv1.VirtualMachineInstance, d accel.Decision, launcherEmulates bool) {
	if launcherEmulates && !d.Emulate {
		d = accel.Decision{Emulate: true, Reason: accel.ReasonKVMUnavailable,
			Message: "the guest runs under software emulation (TCG), which is much slower than hardware virtualization: the launcher could not use KVM"}
	}
	status := metav1.ConditionFalse
	if d.Emulate {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&vmi.Status.Conditions, metav1.Condition{
		Type: virtv1.VirtualMachineInstanceSoftwareEmulation, Status: status, Reason: d.Reason, Message: d.Message, ObservedGeneration: vmi.Generation,
	})
}

// interfaceStatus lists the guest's interfaces: those of the spec (or, when it names none, those the
// launcher reports: the default pod network). The pod network is masqueraded, so its interfaces are
// reached at the Pod's addresses; a Multus network's interface is bridged to the Pod interface
// Multus attached (its addresses are the guest's own, unknown without a guest agent); the MAC is
// the launcher's (else the spec's).
func interfaceStatus(vmi *virtv1.VirtualMachineInstance, live []launcherv1.Interface, pod *corev1.Pod) []virtv1.VirtualMachineInstanceNetworkInterface {
	macs := map[string]string{}
	guest := map[string]launcherv1.Interface{} // what the guest agent says of each NIC
	var names []string
	for _, i := range live {
		macs[i.Name] = i.MAC
		names = append(names, i.Name)
		if i.GuestName != "" {
			guest[i.Name] = i
		}
	}
	if spec := vmi.Spec.Domain.Devices.Interfaces; len(spec) > 0 {
		names = names[:0]
		for _, i := range spec {
			names = append(names, i.Name)
			if macs[i.Name] == "" {
				macs[i.Name] = i.MacAddress
			}
		}
	}
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	secondary := map[string]bool{}
	for _, n := range vmi.Spec.Networks {
		secondary[n.Name] = n.Multus != nil
	}
	out := make([]virtv1.VirtualMachineInstanceNetworkInterface, 0, len(names))
	for _, name := range names {
		var nic virtv1.VirtualMachineInstanceNetworkInterface
		if secondary[name] {
			nic = virtv1.VirtualMachineInstanceNetworkInterface{Name: name, MAC: macs[name],
				PodInterfaceName: launcherv1.SecondaryNetworkDevices(name).PodInterface, InfoSource: "domain, multus-status"}
		} else {
			nic = virtv1.VirtualMachineInstanceNetworkInterface{Name: name, IP: pod.Status.PodIP, IPs: ips, MAC: macs[name]}
		}
		if g, ok := guest[name]; ok {
			// As KubeVirt: the guest's name for the NIC; on a bridged (Multus) network its own
			// addresses, on the masqueraded Pod network the Pod's, which is where it is reached.
			nic.InterfaceName = g.GuestName
			nic.InfoSource = strings.Replace(cmp.Or(nic.InfoSource, "domain"), "domain", "domain, guest-agent", 1)
			if secondary[name] && len(g.GuestIPs) > 0 {
				nic.IP, nic.IPs = g.GuestIPs[0], g.GuestIPs
			}
		}
		out = append(out, nic)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// decideFor is how the guest of this Pod runs: emulation when the node decided so, or when the Pod
// did not get /dev/kvm (the cluster runs guests under emulation, so the controller did not request
// launcherv1.KVMResource).
func decideFor(node accel.Decision, pod *corev1.Pod) accel.Decision {
	if node.Emulate {
		return node
	}
	if launcherv1.RequestsKVM(pod) {
		return node
	}
	return accel.Decision{Emulate: true, Reason: accel.ReasonEmulationConfigured, Message: fmt.Sprintf(
		"the guest runs under software emulation (TCG), which is much slower than hardware virtualization: the cluster is configured for emulation (the launcher Pod does not request %s)",
		launcherv1.KVMResource)}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

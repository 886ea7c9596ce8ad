package nodeagent

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/accel"
	"github.com/podvirt/podvirt/nodeagent/launcherclient"
)

var (
	t0       = metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	kvm      = accel.Decide(false, accel.Result{KVMUsable: true})
	emulated = accel.Decide(false, accel.Result{Why: "no vmx"})
)

func vmiIn(phase virtv1.VirtualMachineInstancePhase, reason string, conds ...metav1.Condition) *virtv1.VirtualMachineInstance {
	return &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", Generation: 3},
		Spec: virtv1.VirtualMachineInstanceSpec{Domain: virtv1.DomainSpec{Devices: virtv1.Devices{
			Interfaces: []virtv1.Interface{{Name: "default", Masquerade: &virtv1.InterfaceMasquerade{}}},
		}}},
		Status: virtv1.VirtualMachineInstanceStatus{Phase: phase, Reason: reason, NodeName: "n1", LauncherPod: "virt-launcher-vm-abcde", Conditions: conds},
	}
}

func readyPod() *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{
		PodIP: "10.244.0.7", PodIPs: []corev1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}}
}

func live(state launcherv1.DomainState, reason string) *launcherv1.Status {
	return &launcherv1.Status{State: state, Reason: reason, Interfaces: []launcherv1.Interface{{Name: "default", MAC: "02:00:00:00:00:01", IPs: []string{"10.0.2.2"}}}}
}

func cond(t *testing.T, vmi *virtv1.VirtualMachineInstance, typ string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(vmi.Status.Conditions, typ)
}

func TestUpdateStatus(t *testing.T) {
	type want struct {
		phase      virtv1.VirtualMachineInstancePhase
		reason     string
		ready      metav1.ConditionStatus // "" = no condition
		readyWhy   string
		paused     metav1.ConditionStatus
		emulation  metav1.ConditionStatus
		interfaces int
		synced     metav1.ConditionStatus
	}
	cases := []struct {
		name string
		vmi  *virtv1.VirtualMachineInstance
		obs  observation
		want want
	}{
		{
			name: "scheduled, launcher runs the guest: Running, Ready, interfaces",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{live: live(launcherv1.DomainRunning, "Started"), accel: kvm},
			want: want{phase: virtv1.Running, ready: "True", readyWhy: ReasonGuestRunning, emulation: "False", interfaces: 1},
		},
		{
			name: "scheduled, launcher has no guest yet (sync pending): nothing changes",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{live: &launcherv1.Status{}, accel: kvm},
			want: want{phase: virtv1.Scheduled},
		},
		{
			name: "disks still being copied: nothing changes (no write)",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{disksPending: true, accel: kvm, pod: &corev1.Pod{}},
			want: want{phase: virtv1.Scheduled},
		},
		{
			name: "a disk image cannot be pulled: Synchronized=False with the kubelet's reason",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs: observation{disksPending: true, accel: kvm, pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: "compute", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				{Name: "volume0-containerdisk", Image: "example/missing:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}},
			}}}},
			want: want{phase: virtv1.Scheduled, synced: "False"},
		},
		{
			name: "a disk container killed before it copied its file: Failed (the launcher would wait forever)",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs: observation{disksPending: true, accel: kvm, pod: &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: launcherv1.ComputeContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				{Name: "volume0-containerdisk", Image: "example/disk:1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}},
			}}}},
			want: want{phase: virtv1.Failed, reason: ReasonSyncFailed, ready: "False", readyWhy: ReasonSyncFailed, synced: "False"},
		},
		{
			name: "running guest under emulation: SoftwareEmulation=True KVMUnavailable",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{live: &launcherv1.Status{State: launcherv1.DomainRunning, Emulation: true}, accel: emulated},
			want: want{phase: virtv1.Running, ready: "True", readyWhy: ReasonGuestRunning, emulation: "True", interfaces: 1},
		},
		{
			name: "paused guest: Paused=True, Ready=False",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{live: live(launcherv1.DomainPaused, launcherv1.ReasonPaused), accel: kvm},
			want: want{phase: virtv1.Running, ready: "False", readyWhy: ReasonGuestPaused, paused: "True", emulation: "False", interfaces: 1},
		},
		{
			name: "unpaused guest: the Paused condition goes away",
			vmi:  vmiIn(virtv1.Running, "", metav1.Condition{Type: virtv1.VirtualMachineInstancePaused, Status: "True", Reason: launcherv1.ReasonPaused}),
			obs:  observation{live: live(launcherv1.DomainRunning, "Started"), accel: kvm},
			want: want{phase: virtv1.Running, ready: "True", readyWhy: ReasonGuestRunning, emulation: "False", interfaces: 1},
		},
		{
			name: "shutting down: still Running, not Ready",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{live: live(launcherv1.DomainShuttingDown, "ShutdownRequested"), accel: kvm},
			want: want{phase: virtv1.Running, ready: "False", readyWhy: ReasonShuttingDown, emulation: "False", interfaces: 1},
		},
		{
			name: "guest runs, Pod not Ready",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{live: live(launcherv1.DomainRunning, ""), accel: kvm, pod: &corev1.Pod{}},
			want: want{phase: virtv1.Running, ready: "False", readyWhy: ReasonPodNotReady, emulation: "False", interfaces: 1},
		},
		{
			name: "launcher reports Shutoff: Succeeded with its reason",
			vmi:  vmiIn(virtv1.Running, "", metav1.Condition{Type: virtv1.VirtualMachineInstancePaused, Status: "True", Reason: launcherv1.ReasonPaused}),
			obs:  observation{live: &launcherv1.Status{State: launcherv1.DomainShutoff, Reason: "GuestShutdown", Message: "the guest powered off"}},
			want: want{phase: virtv1.Succeeded, reason: "GuestShutdown", ready: "False", readyWhy: "GuestShutdown"},
		},
		{
			name: "launcher gone, exit file says Crashed: Failed naming what happened",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{exit: &launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuCrashed", Message: "qemu exited unexpectedly"}},
			want: want{phase: virtv1.Failed, reason: "QemuCrashed", ready: "False", readyWhy: "QemuCrashed"},
		},
		{
			name: "Crashed without a reason: GuestCrashed",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{exit: &launcherv1.Status{State: launcherv1.DomainCrashed}},
			want: want{phase: virtv1.Failed, reason: launcherv1.ReasonGuestCrashed, ready: "False", readyWhy: launcherv1.ReasonGuestCrashed},
		},
		{
			name: "exit file without a guest (launcher ended before sync): left to the controller",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{exit: &launcherv1.Status{Message: "terminated before a guest was started"}},
			want: want{phase: virtv1.Scheduled},
		},
		{
			name: "launcher unreachable, no exit file (starting): nothing changes",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{},
			want: want{phase: virtv1.Scheduled},
		},
		{
			name: "running guest vanished from the launcher: Failed DomainLost",
			vmi:  vmiIn(virtv1.Running, ""),
			obs:  observation{live: &launcherv1.Status{}},
			want: want{phase: virtv1.Failed, reason: ReasonDomainLost, ready: "False", readyWhy: ReasonDomainLost},
		},
		{
			name: "transient sync failure: Synchronized=False, still Scheduled",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{syncErr: errors.New("sync: launcher /v1/sync: context deadline exceeded")},
			want: want{phase: virtv1.Scheduled, synced: "False"},
		},
		{
			name: "launcher refuses the instance (400): Failed SyncFailed",
			vmi:  vmiIn(virtv1.Scheduled, ""),
			obs:  observation{syncErr: &launcherclient.Error{Path: launcherv1.PathSync, StatusCode: http.StatusBadRequest, Message: "disk root: no image"}},
			want: want{phase: virtv1.Failed, reason: ReasonSyncFailed, ready: "False", readyWhy: ReasonSyncFailed, synced: "False"},
		},
		{
			name: "controller already failed it PodFailed, exit file says QemuCrashed: reason refined, phase kept",
			vmi:  vmiIn(virtv1.Failed, "PodFailed"),
			obs:  observation{exit: &launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuCrashed", Message: "qemu exited unexpectedly"}},
			want: want{phase: virtv1.Failed, reason: "QemuCrashed", ready: "False", readyWhy: "QemuCrashed"},
		},
		{
			name: "controller marked PodCompleted, exit file says GracePeriodExpired",
			vmi:  vmiIn(virtv1.Succeeded, "PodCompleted"),
			obs:  observation{exit: &launcherv1.Status{State: launcherv1.DomainShutoff, Reason: "GracePeriodExpired"}},
			want: want{phase: virtv1.Succeeded, reason: "GracePeriodExpired", ready: "False", readyWhy: "GracePeriodExpired"},
		},
		{
			name: "final for another cause (NodeUnresponsive): untouched",
			vmi:  vmiIn(virtv1.Failed, "NodeUnresponsive"),
			obs:  observation{exit: &launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "QemuCrashed"}},
			want: want{phase: virtv1.Failed, reason: "NodeUnresponsive"},
		},
		{
			name: "final phase never moves, even if the launcher disagrees",
			vmi:  vmiIn(virtv1.Succeeded, "PodCompleted"),
			obs:  observation{live: live(launcherv1.DomainRunning, ""), exit: &launcherv1.Status{State: launcherv1.DomainCrashed, Reason: "Killed"}},
			want: want{phase: virtv1.Succeeded, reason: "PodCompleted"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.obs.pod == nil {
				tc.obs.pod = readyPod()
			}
			tc.obs.now = t0
			vmi := tc.vmi
			before := vmi.Status.Phase
			updateStatus(vmi, tc.obs)
			assert.Equal(t, tc.want.phase, vmi.Status.Phase)
			assert.Equal(t, tc.want.reason, vmi.Status.Reason)
			for typ, w := range map[string]metav1.ConditionStatus{
				virtv1.VirtualMachineInstanceReady: tc.want.ready, virtv1.VirtualMachineInstancePaused: tc.want.paused,
				virtv1.VirtualMachineInstanceSoftwareEmulation: tc.want.emulation, virtv1.VirtualMachineInstanceSynchronized: tc.want.synced,
			} {
				c := cond(t, vmi, typ)
				if w == "" {
					assert.Nil(t, c, typ)
					continue
				}
				require.NotNil(t, c, typ)
				assert.Equal(t, w, c.Status, typ)
				assert.Equal(t, int64(3), c.ObservedGeneration, typ)
			}
			if tc.want.ready != "" {
				assert.Equal(t, tc.want.readyWhy, cond(t, vmi, virtv1.VirtualMachineInstanceReady).Reason)
			}
			assert.Len(t, vmi.Status.Interfaces, tc.want.interfaces)
			if before != vmi.Status.Phase {
				require.NotEmpty(t, vmi.Status.PhaseTransitionTimestamps)
				last := vmi.Status.PhaseTransitionTimestamps[len(vmi.Status.PhaseTransitionTimestamps)-1]
				assert.Equal(t, vmi.Status.Phase, last.Phase)
				assert.Equal(t, t0, last.PhaseTransitionTimestamp)
			} else {
				assert.Empty(t, vmi.Status.PhaseTransitionTimestamps, "no transition recorded without a phase change")
			}
		})
	}
}

func TestInterfaceStatus(t *testing.T) {
	pod := readyPod()
	vmi := vmiIn(virtv1.Running, "")
	got := interfaceStatus(vmi, live(launcherv1.DomainRunning, "").Interfaces, pod)
	assert.Equal(t, []virtv1.VirtualMachineInstanceNetworkInterface{{
		Name: "default", IP: "10.244.0.7", IPs: []string{"10.244.0.7", "fd00::7"}, MAC: "02:00:00:00:00:01",
	}}, got, "masquerade: the guest is reached at the Pod's addresses, not its NAT-side 10.0.2.2")

	vmi.Spec.Domain.Devices.Interfaces = nil
	got = interfaceStatus(vmi, []launcherv1.Interface{{Name: "default", MAC: "02:aa:00:00:00:01"}}, pod)
	require.Len(t, got, 1, "without interfaces in the spec, the launcher's default pod network is listed")
	assert.Equal(t, "02:aa:00:00:00:01", got[0].MAC)

	vmi.Spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "net1", MacAddress: "02:bb:00:00:00:02"}}
	got = interfaceStatus(vmi, nil, &corev1.Pod{})
	assert.Equal(t, []virtv1.VirtualMachineInstanceNetworkInterface{{Name: "net1", MAC: "02:bb:00:00:00:02"}}, got,
		"the spec's MAC stands in for the launcher's; no Pod IP yet")

	assert.Nil(t, interfaceStatus(&virtv1.VirtualMachineInstance{}, nil, pod))
}

// With a guest agent: the guest's names for its NICs; the addresses of a bridged (Multus) NIC are the
// guest's own, a masqueraded one is still reached at the Pod's.
func TestInterfaceStatusFromTheGuestAgent(t *testing.T) {
	pod := readyPod()
	vmi := vmiIn(virtv1.Running, "")
	vmi.Spec.Domain.Devices.Interfaces = []virtv1.Interface{{Name: "default"}, {Name: "blue"}}
	vmi.Spec.Networks = []virtv1.Network{{Name: "default", NetworkSource: virtv1.NetworkSource{Pod: &virtv1.PodNetwork{}}},
		{Name: "blue", NetworkSource: virtv1.NetworkSource{Multus: &virtv1.MultusNetwork{NetworkName: "blue-net"}}}}
	got := interfaceStatus(vmi, []launcherv1.Interface{
		{Name: "default", MAC: "02:00:00:00:00:01", GuestName: "eth0", GuestIPs: []string{"10.0.2.15"}},
		{Name: "blue", MAC: "02:00:00:00:00:02", GuestName: "eth1", GuestIPs: []string{"192.168.7.20"}},
	}, pod)
	require.Len(t, got, 2)
	assert.Equal(t, "eth0", got[0].InterfaceName)
	assert.Equal(t, "domain, guest-agent", got[0].InfoSource)
	assert.Equal(t, "10.244.0.7", got[0].IP, "masquerade: the Pod's address, not the guest's NAT-side one")
	assert.Equal(t, "eth1", got[1].InterfaceName)
	assert.Equal(t, "domain, guest-agent, multus-status", got[1].InfoSource)
	assert.Equal(t, "192.168.7.20", got[1].IP)
}

func TestEmulationCondition(t *testing.T) {
	configured := accel.Decide(true, accel.Result{KVMUsable: true})
	cases := []struct {
		name     string
		decision accel.Decision
		launcher bool
		status   metav1.ConditionStatus
		reason   string
	}{
		{"kvm", kvm, false, "False", accel.ReasonKVMAvailable},
		{"configured", configured, true, "True", accel.ReasonEmulationConfigured},
		{"kvm unusable", emulated, true, "True", accel.ReasonKVMUnavailable},
		{"launcher emulates on its own", kvm, true, "True", accel.ReasonKVMUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vmi := vmiIn(virtv1.Running, "")
			setEmulationCondition(vmi, tc.decision, tc.launcher)
			c := cond(t, vmi, virtv1.VirtualMachineInstanceSoftwareEmulation)
			require.NotNil(t, c)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			if c.Status == "True" {
				assert.Contains(t, c.Message, "software emulation")
				assert.Contains(t, c.Message, "slower")
			}
		})
	}
}

func TestDecideFor(t *testing.T) {
	withKVM := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: launcherv1.ComputeContainer,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceName(launcherv1.KVMResource): resource.MustParse("1"),
		}},
	}}}}
	withoutKVM := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: launcherv1.ComputeContainer}}}}

	assert.Equal(t, kvm, decideFor(kvm, withKVM), "KVM node, Pod got /dev/kvm")
	d := decideFor(kvm, withoutKVM)
	assert.True(t, d.Emulate, "a Pod without /dev/kvm must emulate even on a KVM node")
	assert.Equal(t, accel.ReasonEmulationConfigured, d.Reason)
	assert.Contains(t, d.Message, launcherv1.KVMResource)
	assert.Equal(t, emulated, decideFor(emulated, withKVM), "the node's decision to emulate wins")
}

func TestStatusEvents(t *testing.T) {
	scheduled := vmiIn(virtv1.Scheduled, "").Status
	running := vmiIn(virtv1.Running, "",
		metav1.Condition{Type: virtv1.VirtualMachineInstanceSoftwareEmulation, Status: "True", Reason: accel.ReasonKVMUnavailable, Message: "slow"}).Status
	paused := vmiIn(virtv1.Running, "",
		metav1.Condition{Type: virtv1.VirtualMachineInstanceSoftwareEmulation, Status: "True", Reason: accel.ReasonKVMUnavailable, Message: "slow"},
		metav1.Condition{Type: virtv1.VirtualMachineInstancePaused, Status: "True", Reason: launcherv1.ReasonPaused}).Status
	failed := vmiIn(virtv1.Failed, "QemuCrashed",
		metav1.Condition{Type: virtv1.VirtualMachineInstanceReady, Status: "False", Reason: "QemuCrashed", Message: "qemu exited unexpectedly"}).Status
	succeeded := vmiIn(virtv1.Succeeded, "GuestShutdown").Status

	reasons := func(es []userEvent) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Reason)
		}
		return out
	}
	assert.Equal(t, []string{EventStarted, EventSoftwareEmulation}, reasons(statusEvents(&scheduled, &running)))
	assert.Equal(t, []string{EventPaused}, reasons(statusEvents(&running, &paused)))
	assert.Equal(t, []string{EventUnpaused}, reasons(statusEvents(&paused, &running)))
	assert.Empty(t, statusEvents(&running, &running))
	es := statusEvents(&running, &failed)
	assert.Equal(t, []string{EventFailed}, reasons(es))
	assert.Equal(t, corev1.EventTypeWarning, es[0].Type)
	assert.Contains(t, es[0].Note, "QemuCrashed")
	assert.Contains(t, es[0].Note, "qemu exited unexpectedly")
	assert.Equal(t, []string{EventStopped}, reasons(statusEvents(&running, &succeeded)))
}

// The guest agent's state follows the launcher: AgentConnected while it is connected (no condition
// otherwise, as KubeVirt), the OS it last reported (kept when it goes away), frozen while frozen.
func TestGuestAgentStatus(t *testing.T) {
	os := &virtv1.VirtualMachineInstanceGuestOSInfo{ID: "podvirt", Name: "Podvirt demo guest"}
	vmi := vmiIn(virtv1.Running, "")
	setGuestAgent(vmi, launcherv1.Status{State: launcherv1.DomainRunning})
	assert.Nil(t, meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceAgentConnected), "no agent: no condition")
	assert.Empty(t, vmi.Status.GuestOSInfo.ID)

	setGuestAgent(vmi, launcherv1.Status{State: launcherv1.DomainRunning, AgentConnected: true, GuestOSInfo: os, Frozen: true})
	c := cond(t, vmi, virtv1.VirtualMachineInstanceAgentConnected)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, *os, vmi.Status.GuestOSInfo)
	assert.Equal(t, virtv1.FSFrozen, vmi.Status.FSFreezeStatus)

	setGuestAgent(vmi, launcherv1.Status{State: launcherv1.DomainRunning})
	assert.Nil(t, meta.FindStatusCondition(vmi.Status.Conditions, virtv1.VirtualMachineInstanceAgentConnected), "the agent went away")
	assert.Equal(t, "podvirt", vmi.Status.GuestOSInfo.ID, "what it said stays")
	assert.Empty(t, vmi.Status.FSFreezeStatus)
}

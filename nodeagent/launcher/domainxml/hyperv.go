package domainxml

import (
	"fmt"

	"libvirt.org/go/libvirtxml"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// hypervField is the path of the Hyper-V enlightenments in an instance's spec.
const hypervField = "spec.domain.features.hyperv"

// setHyperV maps the Hyper-V enlightenments, the KVM signature and paravirtual spinlocks. Under
// emulation (no KVM) qemu cannot offer the enlightenments that need the hypervisor's help (the
// virtual processor index and everything built on it, and passthrough): asking for one fails the
// instance naming the field rather than starting a guest without it. hypervClock says the guest
// needs the Hyper-V reference clock (the synthetic timer runs on it).
func setHyperV(fl *libvirtxml.DomainFeatureList, f *virtv1.Features, emulation bool) (hypervClock bool, err error) {
	if f == nil {
		return false, nil
	}
	if f.KVM != nil && f.KVM.Hidden {
		fl.KVM = &libvirtxml.DomainFeatureKVM{Hidden: &libvirtxml.DomainFeatureState{State: "on"}}
	}
	if f.Pvspinlock != nil {
		fl.PVSpinlock = &libvirtxml.DomainFeatureState{State: onOff(enabled(f.Pvspinlock, true))}
	}
	if p := f.HypervPassthrough; p != nil && (p.Enabled == nil || *p.Enabled) {
		if emulation {
			return false, fmt.Errorf("spec.domain.features.hypervPassthrough: needs KVM; this node runs guests under emulation")
		}
		fl.HyperV = &libvirtxml.DomainFeatureHyperV{Mode: "passthrough"}
		return true, nil
	}
	h := f.Hyperv
	if h == nil {
		return false, nil
	}
	var stimer, tlbflush *virtv1.FeatureState
	if h.SyNICTimer != nil {
		stimer = &h.SyNICTimer.FeatureState
	}
	if h.TLBFlush != nil {
		tlbflush = &h.TLBFlush.FeatureState
	}
	if emulation {
		for _, e := range []struct {
			name string
			s    *virtv1.FeatureState
		}{
			{"vpindex", h.VPIndex}, {"synic", h.SyNIC}, {"synictimer", stimer}, {"tlbflush", tlbflush},
			{"ipi", h.IPI}, {"evmcs", h.EVMCS}, {"reenlightenment", h.Reenlightenment},
		} {
			if e.s != nil && enabled(e.s, true) {
				return false, fmt.Errorf("%s.%s: needs KVM; this node runs guests under emulation", hypervField, e.name)
			}
		}
	}
	hv := &libvirtxml.DomainFeatureHyperV{
		Mode:            "custom",
		Relaxed:         state(h.Relaxed),
		VAPIC:           state(h.VAPIC),
		VPIndex:         state(h.VPIndex),
		Runtime:         state(h.Runtime),
		Synic:           state(h.SyNIC),
		Reset:           state(h.Reset),
		Frequencies:     state(h.Frequencies),
		ReEnlightenment: state(h.Reenlightenment),
		IPI:             state(h.IPI),
		EVMCS:           state(h.EVMCS),
		TLBFlush:        state(tlbflush),
	}
	if s := h.Spinlocks; s != nil {
		hv.Spinlocks = &libvirtxml.DomainFeatureHyperVSpinlocks{DomainFeatureState: *state(&s.FeatureState), Retries: 4096}
		if s.Retries != nil {
			hv.Spinlocks.Retries = uint(*s.Retries)
		}
		if hv.Spinlocks.State == "off" {
			hv.Spinlocks.Retries = 0
		}
	}
	if t := h.SyNICTimer; t != nil {
		hv.STimer = &libvirtxml.DomainFeatureHyperVSTimer{DomainFeatureState: *state(&t.FeatureState), Direct: state(t.Direct)}
		hypervClock = enabled(&t.FeatureState, true) // qemu's hv-stimer needs hv-time
	}
	if v := h.VendorID; v != nil {
		hv.VendorId = &libvirtxml.DomainFeatureHyperVVendorId{DomainFeatureState: *state(&v.FeatureState), Value: v.VendorID}
	}
	fl.HyperV = hv
	return hypervClock, nil
}

// state is a feature's libvirt state: on unless disabled; nil when the spec does not mention it.
func state(s *virtv1.FeatureState) *libvirtxml.DomainFeatureState {
	if s == nil {
		return nil
	}
	return &libvirtxml.DomainFeatureState{State: onOff(enabled(s, true))}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

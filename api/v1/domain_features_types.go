package v1

// Clock is the guest's clock offset and timers.
//
// +kubebuilder:pruning:PreserveUnknownFields
type Clock struct {
	// ClockOffset sets the guest clock to UTC (with an optional offset) or to a timezone.
	ClockOffset `json:",inline"`
	// Timer lists the timers given to the guest.
	// +optional
	Timer *Timer `json:"timer,omitempty"`
}

// ClockOffset is the guest clock's base; exactly one member is set.
type ClockOffset struct {
	// UTC runs the guest clock on UTC, optionally shifted.
	// +optional
	UTC *ClockOffsetUTC `json:"utc,omitempty"`
	// Timezone runs the guest clock on a TZ-database zone such as Europe/Paris.
	// +optional
	Timezone *ClockOffsetTimezone `json:"timezone,omitempty"`
}

// ClockOffsetUTC runs the guest clock on UTC.
type ClockOffsetUTC struct {
	// OffsetSeconds shifts the guest clock from UTC; when set, guest changes to the clock persist across reboots.
	// +optional
	OffsetSeconds *int `json:"offsetSeconds,omitempty"`
}

// ClockOffsetTimezone is a TZ-database zone name.
type ClockOffsetTimezone string

// Timer holds the guest's timers.
type Timer struct {
	// HPET is the High Precision Event Timer.
	// +optional
	HPET *HPETTimer `json:"hpet,omitempty"`
	// KVM is the paravirtual kvmclock (Linux guests).
	// +optional
	KVM *KVMTimer `json:"kvm,omitempty"`
	// PIT is the Programmable Interval Timer.
	// +optional
	PIT *PITTimer `json:"pit,omitempty"`
	// RTC is the Real Time Clock.
	// +optional
	RTC *RTCTimer `json:"rtc,omitempty"`
	// Hyperv is the paravirtual Hyper-V clock (Windows guests).
	// +optional
	Hyperv *HypervTimer `json:"hyperv,omitempty"`
}

// HPETTickPolicy is how missed HPET ticks are handled (delay, catchup, merge, discard).
type HPETTickPolicy string

// PITTickPolicy is how missed PIT ticks are handled (delay, catchup, discard).
type PITTickPolicy string

// RTCTickPolicy is how missed RTC ticks are handled (delay, catchup).
type RTCTickPolicy string

// RTCTimerTrack is the time source the RTC follows (guest or wall).
type RTCTimerTrack string

// HPETTimer configures the HPET.
type HPETTimer struct {
	// TickPolicy for missed ticks.
	// +optional
	TickPolicy HPETTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled, when false, keeps the timer out even if the machine type would add it; defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// KVMTimer configures kvmclock.
type KVMTimer struct {
	// Enabled, when false, keeps the timer out; defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// PITTimer configures the PIT.
type PITTimer struct {
	// TickPolicy for missed ticks.
	// +optional
	TickPolicy PITTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled, when false, keeps the timer out; defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// RTCTimer configures the RTC.
type RTCTimer struct {
	// TickPolicy for missed ticks.
	// +optional
	TickPolicy RTCTickPolicy `json:"tickPolicy,omitempty"`
	// Enabled, when false, keeps the timer out; defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
	// Track is the time source followed.
	// +optional
	Track RTCTimerTrack `json:"track,omitempty"`
}

// HypervTimer configures the Hyper-V clock.
type HypervTimer struct {
	// Enabled, when false, keeps the timer out; defaults to true.
	// +optional
	Enabled *bool `json:"present,omitempty"`
}

// Features are hypervisor features exposed to the guest.
type Features struct {
	// ACPI, enabled by default; needed for graceful shutdown.
	// +optional
	ACPI FeatureState `json:"acpi,omitempty"`
	// APIC; defaults to the machine type's setting.
	// +optional
	APIC *FeatureAPIC `json:"apic,omitempty"`
	// HypervPassthrough turns on every Hyper-V enlightenment the host supports (not migratable).
	// +optional
	HypervPassthrough *HyperVPassthrough `json:"hypervPassthrough,omitempty"`
	// Hyperv selects individual Hyper-V enlightenments.
	// +optional
	Hyperv *FeatureHyperv `json:"hyperv,omitempty"`
	// SMM (System Management Mode).
	// +optional
	SMM *FeatureState `json:"smm,omitempty"`
	// KVM controls how KVM is shown to the guest.
	// +optional
	KVM *FeatureKVM `json:"kvm,omitempty"`
	// Pvspinlock advertises paravirtual spinlocks to the guest.
	// +optional
	Pvspinlock *FeatureState `json:"pvspinlock,omitempty"`
}

// FeatureState turns a feature on or off.
type FeatureState struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// FeatureAPIC is the APIC with its end-of-interrupt option.
type FeatureAPIC struct {
	FeatureState `json:",inline"`
	// EndOfInterrupt enables EOI notification in the guest; defaults to false.
	// +optional
	EndOfInterrupt bool `json:"endOfInterrupt,omitempty"`
}

// HyperVPassthrough turns on all supported Hyper-V enlightenments.
type HyperVPassthrough struct {
	// Enabled turns passthrough on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// FeatureKVM controls KVM visibility.
type FeatureKVM struct {
	// Hidden hides KVM from MSR-based hypervisor detection; defaults to false.
	// +optional
	Hidden bool `json:"hidden,omitempty"`
}

// FeatureHyperv selects Hyper-V enlightenments; each defaults to the machine type's setting.
type FeatureHyperv struct {
	// Relaxed disables the guest's watchdog timeouts.
	// +optional
	Relaxed *FeatureState `json:"relaxed,omitempty"`
	// VAPIC is the paravirtual APIC.
	// +optional
	VAPIC *FeatureState `json:"vapic,omitempty"`
	// Spinlocks sets the spinlock retry count.
	// +optional
	Spinlocks *FeatureSpinlocks `json:"spinlocks,omitempty"`
	// VPIndex exposes the virtual processor index.
	// +optional
	VPIndex *FeatureState `json:"vpindex,omitempty"`
	// Runtime exposes processor runtime accounting.
	// +optional
	Runtime *FeatureState `json:"runtime,omitempty"`
	// SyNIC is the synthetic interrupt controller.
	// +optional
	SyNIC *FeatureState `json:"synic,omitempty"`
	// SyNICTimer is the synthetic timer (needs synic).
	// +optional
	SyNICTimer *SyNICTimer `json:"synictimer,omitempty"`
	// Reset lets the guest reset itself through Hyper-V (needs synic).
	// +optional
	Reset *FeatureState `json:"reset,omitempty"`
	// VendorID sets the hypervisor vendor id the guest sees.
	// +optional
	VendorID *FeatureVendorID `json:"vendorid,omitempty"`
	// Frequencies exposes TSC and APIC frequencies.
	// +optional
	Frequencies *FeatureState `json:"frequencies,omitempty"`
	// Reenlightenment notifies the guest of TSC frequency changes.
	// +optional
	Reenlightenment *FeatureState `json:"reenlightenment,omitempty"`
	// TLBFlush is paravirtual TLB flushing (needs vpindex).
	// +optional
	TLBFlush *TLBFlush `json:"tlbflush,omitempty"`
	// IPI is paravirtual inter-processor interrupts (needs vpindex).
	// +optional
	IPI *FeatureState `json:"ipi,omitempty"`
	// EVMCS is the enlightened VMCS for nested guests (needs vapic).
	// +optional
	EVMCS *FeatureState `json:"evmcs,omitempty"`
}

// FeatureSpinlocks is the Hyper-V spinlock enlightenment.
type FeatureSpinlocks struct {
	FeatureState `json:",inline"`
	// Retries before the guest notifies the hypervisor; at least 4096, defaults to 4096.
	// +optional
	Retries *uint32 `json:"spinlocks,omitempty"`
}

// SyNICTimer is the Hyper-V synthetic timer.
type SyNICTimer struct {
	FeatureState `json:",inline"`
	// Direct delivers timer expirations as direct interrupts.
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
}

// FeatureVendorID is the Hyper-V vendor id enlightenment.
type FeatureVendorID struct {
	FeatureState `json:",inline"`
	// VendorID is the vendor string, at most 12 characters.
	// +optional
	VendorID string `json:"vendorid,omitempty"`
}

// TLBFlush is the Hyper-V TLB flush enlightenment.
type TLBFlush struct {
	FeatureState `json:",inline"`
	// Direct sends flush requests straight to the hypervisor.
	// +optional
	Direct *FeatureState `json:"direct,omitempty"`
	// Extended allows partial TLB flushes.
	// +optional
	Extended *FeatureState `json:"extended,omitempty"`
}

// LaunchSecurity selects a confidential-computing technology.
type LaunchSecurity struct {
	// SEV is AMD Secure Encrypted Virtualization.
	// +optional
	SEV *SEV `json:"sev,omitempty"`
	// SNP is AMD SEV with Secure Nested Paging.
	// +optional
	SNP *SEVSNP `json:"snp,omitempty"`
	// TDX is Intel Trust Domain Extensions.
	// +optional
	TDX *TDX `json:"tdx,omitempty"`
}

// SEV configures AMD SEV.
type SEV struct {
	// Policy is the SEV guest policy.
	// +optional
	Policy *SEVPolicy `json:"policy,omitempty"`
	// Attestation, when set, runs the attestation flow before the guest starts.
	// +optional
	Attestation *SEVAttestation `json:"attestation,omitempty"`
	// Session is the base64 launch session blob.
	// +optional
	Session string `json:"session,omitempty"`
	// DHCert is the guest owner's base64 Diffie-Hellman certificate.
	// +optional
	DHCert string `json:"dhCert,omitempty"`
}

// SEVPolicy holds SEV guest policy bits.
type SEVPolicy struct {
	// EncryptedState requires SEV-ES; defaults to false.
	// +optional
	EncryptedState *bool `json:"encryptedState,omitempty"`
}

// SEVAttestation requests SEV attestation; it has no settings.
type SEVAttestation struct{}

// SEVSNP configures AMD SEV-SNP; each field is passed through to libvirt as a string.
type SEVSNP struct {
	// Policy is the SNP guest policy (e.g. 0x30000).
	// +optional
	Policy string `json:"policy,omitempty"`
	// VCEK selects whether the VCEK is used for the attestation report.
	// +optional
	VCEK string `json:"vcek,omitempty"`
	// AuthorKey selects whether the ID auth structure carries an author key.
	// +optional
	AuthorKey string `json:"authorKey,omitempty"`
	// KernelHashes includes kernel, initrd and command-line hashes in the measurement.
	// +optional
	KernelHashes string `json:"kernelHashes,omitempty"`
	// Cbitpos is the C-bit position in guest page table entries.
	// +optional
	Cbitpos string `json:"cbitpos,omitempty"`
	// IDBlock is the base64 ID block structure.
	// +optional
	IDBlock string `json:"idBlock,omitempty"`
	// IDAuth is the base64 ID authentication structure.
	// +optional
	IDAuth string `json:"idAuth,omitempty"`
	// ReducedPhysBits is the number of physical address bits lost to encryption.
	// +optional
	ReducedPhysBits string `json:"reducedPhysBits,omitempty"`
}

// TDX requests Intel TDX; it has no settings.
type TDX struct{}

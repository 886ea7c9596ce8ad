package dashboard

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// detailView is the selected object: status, spec summary, conditions, the instance's phase
// timeline, why it is stuck, and as many of its recent events as the terminal's height leaves room for.
func (m Model) detailView(room int) string {
	r, ok := m.target()
	if !ok {
		return "  " + m.focus + " is gone (deleted)\n\n" + m.style("8", false, "  esc back")
	}
	now := m.now()
	lines := []string{
		m.style("", true, r.Namespace+"/"+r.Name) + "  " + r.Kind.Singular(),
		"  status:     " + m.style(statusColor(r.Status), true, r.Status) + fmt.Sprintf("   ready: %t   age: %s", r.Ready, age(r.Created, now)),
	}
	if r.Kind != KindVMIRS {
		inst := "none"
		if r.vmi != nil {
			inst = fmt.Sprintf("%s on %s, IP %s", dash(r.Phase), dash(r.Node), dash(r.IP))
		}
		lines = append(lines, "  instance:   "+inst)
	}
	lines = append(lines, m.specLines(r)...)
	if w := r.Why(now); w != "" { // wrapped to the terminal: a scheduler's message runs long
		lines = append(lines, m.style("1", true, "  why:        ")+m.wrap(w, 14))
	}
	lines = append(lines, m.conditionLines(r)...)
	if tl := timeline(r.vmi, now.Location()); tl != "" {
		lines = append(lines, "  timeline:   "+m.wrap(tl, 14))
	}
	body := strings.Split(strings.Join(lines, "\n"), "\n")
	limit := max(4, room)
	if len(body) > limit {
		body = append(body[:limit-1], m.style("8", false, fmt.Sprintf("  … %d more lines (a taller terminal shows them)", len(body)-limit+1)))
	}
	return strings.Join(append(body, m.eventLines(r, now, limit-len(body))...), "\n")
}

// wrap fits s to the terminal, continuation lines indented by indent.
func (m Model) wrap(s string, indent int) string {
	wrapped := strings.Split(lipgloss.NewStyle().Width(max(20, m.width-indent)).Render(s), "\n")
	for i := range wrapped {
		wrapped[i] = strings.TrimRight(wrapped[i], " ") // Width pads every line
	}
	return strings.Join(wrapped, "\n"+strings.Repeat(" ", indent))
}

// specLines summarise the spec: CPU, memory, disks, networks (and replicas of a replica set).
func (m Model) specLines(r Row) []string {
	var spec *virtv1.VirtualMachineInstanceSpec
	var lines []string
	switch {
	case r.vm != nil && r.vm.Spec.Template != nil:
		spec = &r.vm.Spec.Template.Spec
		lines = append(lines, "  run:        "+string(r.vm.Spec.EffectiveRunStrategy()))
	case r.vmi != nil:
		spec = &r.vmi.Spec
	case r.rs != nil:
		lines = append(lines, fmt.Sprintf("  replicas:   %d wanted, %d current, %d ready", r.rs.Spec.WantedReplicas(), r.rs.Status.Replicas, r.rs.Status.ReadyReplicas))
		if r.rs.Spec.Template != nil {
			spec = &r.rs.Spec.Template.Spec
		}
	}
	if spec == nil {
		return lines
	}
	d := spec.Domain
	cpu := "1 vCPU"
	if c := d.CPU; c != nil {
		s, co, t := max(c.Sockets, 1), max(c.Cores, 1), max(c.Threads, 1)
		cpu = fmt.Sprintf("%d vCPU (%d socket × %d core × %d thread)", s*co*t, s, co, t)
	}
	mem := "-"
	if d.Memory != nil && d.Memory.Guest != nil {
		mem = d.Memory.Guest.String()
	} else if q, ok := d.Resources.Requests["memory"]; ok {
		mem = q.String()
	}
	lines = append(lines, "  cpu/memory: "+cpu+", "+mem)
	disks := make([]string, 0, len(d.Devices.Disks))
	for _, disk := range d.Devices.Disks {
		disks = append(disks, disk.Name+" ("+volumeSource(spec.Volumes, disk.Name)+")")
	}
	if len(disks) > 0 {
		lines = append(lines, "  disks:      "+m.wrap(strings.Join(disks, ", "), 14))
	}
	nets := make([]string, 0, len(spec.Networks))
	for _, n := range spec.Networks {
		kind := "pod"
		if n.Pod == nil {
			kind = "other"
		}
		nets = append(nets, n.Name+" ("+kind+")")
	}
	if len(nets) > 0 {
		lines = append(lines, "  networks:   "+strings.Join(nets, ", "))
	}
	return lines
}

// volumeSource names the kind (and image or claim) of the volume called name.
func volumeSource(volumes []virtv1.Volume, name string) string {
	for _, v := range volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.ContainerDisk != nil:
			return "containerDisk " + v.ContainerDisk.Image
		case v.PersistentVolumeClaim != nil:
			return "PVC " + v.PersistentVolumeClaim.ClaimName
		case v.DataVolume != nil:
			return "DataVolume " + v.DataVolume.Name
		case v.CloudInitNoCloud != nil:
			return "cloudInitNoCloud"
		case v.EmptyDisk != nil:
			return "emptyDisk"
		}
	}
	return "no volume"
}

// conditionLines list the object's conditions (the VM's, else the instance's), the false ones with
// their reason.
func (m Model) conditionLines(r Row) []string {
	var conds []metav1.Condition
	switch {
	case r.vm != nil:
		conds = r.vm.Status.Conditions
	case r.vmi != nil:
		conds = r.vmi.Status.Conditions
	case r.rs != nil:
		conds = r.rs.Status.Conditions
	}
	if len(conds) == 0 {
		return nil
	}
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		p := c.Type + "=" + string(c.Status)
		if c.Status != metav1.ConditionTrue && c.Reason != "" {
			p += " (" + c.Reason + ")"
		}
		parts = append(parts, p)
	}
	return []string{"  conditions: " + m.wrap(strings.Join(parts, ", "), 14)}
}

// timeline is the instance's phases with the time each took to reach: "Pending 12:00:01 →
// Scheduling +0.4s → Running +2.5s".
func timeline(vmi *virtv1.VirtualMachineInstance, loc *time.Location) string {
	if vmi == nil || len(vmi.Status.PhaseTransitionTimestamps) == 0 {
		return ""
	}
	ts := vmi.Status.PhaseTransitionTimestamps
	parts := []string{string(ts[0].Phase) + " " + ts[0].PhaseTransitionTimestamp.In(loc).Format(time.TimeOnly)}
	for _, t := range ts[1:] {
		d := t.PhaseTransitionTimestamp.Sub(ts[0].PhaseTransitionTimestamp.Time)
		parts = append(parts, fmt.Sprintf("%s +%s", t.Phase, d.Round(100*time.Millisecond)))
	}
	return strings.Join(parts, " → ")
}

// eventLines are the recent events of the object (and its launcher Pod) that fit in room lines,
// newest last.
func (m Model) eventLines(r Row, now time.Time, room int) []string {
	switch {
	case room < 2:
		return nil
	case m.events.Key != r.Key():
		return []string{"  events:     loading…"}
	case len(m.events.Events) == 0:
		return []string{"  events:     none"}
	}
	lines := []string{"  events:"}
	events := m.events.Events
	if len(events) > room-1 {
		events = events[len(events)-max(1, room-1):]
	}
	for _, e := range events {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (×%d)", e.Count)
		}
		color := ""
		if e.Type == "Warning" {
			color = "1"
		}
		head := fmt.Sprintf("    %-4s %s %s: ", age(e.Last, now), e.Reason, e.Object)
		text := cut(e.Message+count, max(10, m.width-len([]rune(head))))
		lines = append(lines, fmt.Sprintf("    %-4s %s %s: %s", age(e.Last, now), m.style(color, false, e.Reason), e.Object, text))
	}
	return lines
}

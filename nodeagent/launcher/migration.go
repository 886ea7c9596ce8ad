package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/nodeagent/launcher/domainxml"
)

// Live migration, as KubeVirt does it: libvirt's managed (not peer-to-peer) migration driven by the
// source launcher, the target's libvirt reached through a unix socket, the memory stream and the
// disks' NBD copy through two more; the node agents carry the three between the Pods (see
// launcherv1.MigrationDir). The source keeps the embedded driver; the target runs a libvirt daemon
// (the embedded driver cannot be reached from outside) and adopts the guest once it runs.

// incoming is what a migration target waits for.
type incoming struct {
	vmi       *virtv1.VirtualMachineInstance
	plan      *domainxml.Plan
	emulation bool
}

// prepareTarget makes this launcher a migration target: the instance's files prepared as for a
// start, a libvirt daemon listening in MigrationDir. Asked again for the same instance, it does nothing.
func (g *guest) prepareTarget(ctx context.Context, req launcherv1.SyncRequest) error {
	vmi, err := g.parseVMI(req)
	if err != nil {
		return err
	}
	switch {
	case g.target != nil && g.incoming != nil && g.incoming.vmi.UID == vmi.UID:
		return nil
	case g.target != nil || g.dom != nil:
		return fmt.Errorf("%w: this launcher already runs or awaits a guest", errConflict)
	case g.shutdownReq:
		return fmt.Errorf("%w: the launcher is terminating", errConflict)
	}
	plan, err := g.prepare(ctx, vmi, req.Emulation)
	if err != nil {
		return err
	}
	d, err := startDaemon(ctx, g.cfg)
	if err != nil {
		return err
	}
	g.target, g.incoming = d, &incoming{vmi: vmi, plan: plan, emulation: req.Emulation}
	g.migration = &launcherv1.MigrationStatus{Role: launcherv1.MigrationTarget, Phase: launcherv1.MigrationRunning, StartTime: time.Now().UTC()}
	g.cfg.Log.Info("Migration target ready: waiting for the guest", "domain", plan.Domain.Name)
	g.publish(launcherv1.Status{Reason: launcherv1.ReasonMigrating, Message: "waiting for the guest to arrive", Migration: g.migrationStatus()})
	return nil
}

// adopt takes over the guest once it runs in the target's daemon: from then on this launcher
// manages it as if it had started it.
func (g *guest) adopt() {
	name := g.incoming.plan.Domain.Name
	dom, err := g.target.hv.conn.LookupDomainByName(name)
	if err != nil {
		return // not arrived yet
	}
	if state, _, err := dom.GetState(); err != nil || state != libvirt.DOMAIN_RUNNING {
		_ = dom.Free() // still arriving (paused until the source hands over)
		return
	}
	in := g.incoming
	if err := g.attach(dom, in.plan); err != nil {
		// The guest runs; only the forwarded ports may be missing.
		g.cfg.Log.Error("Setting up the arrived guest", "err", err)
	}
	g.hv, g.dom, g.vmi, g.emulation, g.incoming = g.target.hv, dom, in.vmi, in.emulation, nil
	g.started.Store(true)
	// The daemon is the guest's now: nobody else may connect to it (the launcher's connection stays).
	if err := os.Remove(filepath.Join(g.cfg.PrivateDir, launcherv1.MigrationDir, launcherv1.MigrationLibvirtSocket)); err != nil {
		g.cfg.Log.Error("Removing the migration's libvirt socket", "err", err)
	}
	now := time.Now().UTC()
	g.migration.Phase, g.migration.EndTime = launcherv1.MigrationCompleted, &now
	g.cfg.Log.Info("Guest arrived", "domain", name, "took", now.Sub(g.migration.StartTime).Round(time.Millisecond).String())
}

// migrate starts sending the running guest to the target; the outcome comes back on g.migrated.
func (g *guest) migrate(req launcherv1.MigrateRequest) error {
	if err := validMigrate(req); err != nil {
		return err
	}
	switch {
	case g.migration != nil && g.migration.UID == req.UID:
		return nil // asked again: its status tells how far it is
	case g.migrating:
		return fmt.Errorf("%w: a migration is already running", errConflict)
	case g.shutdownReq:
		return fmt.Errorf("%w: the guest is shutting down", errConflict)
	case g.frozen || g.freezing > 0:
		return fmt.Errorf("%w: the guest's file systems are frozen: unfreeze them first", errConflict)
	}
	if state, _, err := g.dom.GetState(); err != nil || state != libvirt.DOMAIN_RUNNING {
		return fmt.Errorf("%w: only a running guest migrates (it is %s)", errConflict, stateOf(state))
	}
	x, err := g.dom.GetXMLDesc(libvirt.DOMAIN_XML_MIGRATABLE | libvirt.DOMAIN_XML_SECURE)
	if err != nil {
		return fmt.Errorf("get the migratable domain xml: %w", err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return fmt.Errorf("parse domain xml: %w", err)
	}
	dir := filepath.Join(g.cfg.PrivateDir, launcherv1.MigrationDir)
	params := &libvirt.DomainMigrateParameters{
		URISet: true, URI: "unix://" + filepath.Join(dir, launcherv1.MigrationMemorySocket),
		DestXMLSet: true, DestXML: x,
		BandwidthSet: req.BandwidthMiBps > 0, Bandwidth: req.BandwidthMiBps,
	}
	flags := libvirt.MIGRATE_LIVE
	if disks := copiedDisks(&def); len(disks) > 0 {
		params.MigrateDisksSet, params.MigrateDisks = true, disks
		params.DisksURISet, params.DisksURI = true, "unix://"+filepath.Join(dir, launcherv1.MigrationDisksSocket)
		flags |= libvirt.MIGRATE_NON_SHARED_INC
	}
	dconnURI := "qemu+unix:///session?socket=" + filepath.Join(dir, launcherv1.MigrationLibvirtSocket)
	g.migrating = true
	g.migration = &launcherv1.MigrationStatus{UID: req.UID, Role: launcherv1.MigrationSource, Phase: launcherv1.MigrationRunning, StartTime: time.Now().UTC()}
	g.cfg.Log.Info("Migrating the guest", "target", dconnURI, "disks", params.MigrateDisks)
	dom, conn := g.dom, g.hv.conn
	watch := newMigrationWatch(time.Now(), req)
	go func() { // owned: ends with Migrate3, whose outcome the guest's loop waits for
		ended := make(chan struct{})
		var reason atomic.Pointer[string]
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchMigration(dom, watch, ended, &reason)
		}()
		res := sendGuest(conn, dom, dconnURI, params, flags)
		close(ended)
		wg.Wait()
		if why := reason.Load(); why != nil && res.err != nil {
			res.err = fmt.Errorf("%s: %w", *why, res.err)
		}
		g.migrated <- res
	}()
	return nil
}

// sent is the outcome of a migration: its error, else libvirt's figures of it.
type sent struct {
	err  error
	info *libvirt.DomainJobInfo
}

// sendGuest runs the migration to the libvirt at dconnURI; it returns when the guest runs there,
// or the migration failed (the guest runs here still).
func sendGuest(conn *libvirt.Connect, dom *libvirt.Domain, dconnURI string, params *libvirt.DomainMigrateParameters, flags libvirt.DomainMigrateFlags) sent {
	dconn, err := libvirt.NewConnect(dconnURI)
	if err != nil {
		return sent{err: fmt.Errorf("connect to the target's libvirt: %w", err)}
	}
	defer func() { _, _ = dconn.Close() }()
	// libvirt reports the completed job's figures (bytes, downtime) in an event: the domain is gone
	// here when Migrate3 returns.
	stats := make(chan libvirt.DomainJobInfo, 1)
	if id, err := conn.DomainEventJobCompletedRegister(dom, func(_ *libvirt.Connect, _ *libvirt.Domain, ev *libvirt.DomainEventJobCompleted) {
		select {
		case stats <- ev.Info:
		default:
		}
	}); err == nil {
		defer func() { _ = conn.DomainEventDeregister(id) }()
	}
	moved, err := dom.Migrate3(dconn, params, flags)
	if err != nil {
		return sent{err: err}
	}
	_ = moved.Free()
	select {
	case info := <-stats:
		return sent{info: &info}
	case <-time.After(time.Second):
		return sent{}
	}
}

// migrationEnded records the outcome of the source's migration.
func (g *guest) migrationEnded(res sent) {
	err := res.err
	g.migrating = false
	if res.info != nil {
		g.migration.Bytes, g.migration.DowntimeMillis = res.info.DataProcessed, res.info.Downtime
	}
	now := time.Now().UTC()
	g.migration.EndTime = &now
	took := now.Sub(g.migration.StartTime).Round(time.Millisecond).String()
	if err != nil {
		g.migration.Phase, g.migration.Message = launcherv1.MigrationFailed, err.Error()
		g.cfg.Log.Error("Migration failed: the guest runs here still", "err", err, "took", took)
		return
	}
	g.migration.Phase = launcherv1.MigrationCompleted
	g.cfg.Log.Info("Migration completed: the guest runs on the target", "took", took, "bytes", g.migration.Bytes, "downtimeMillis", g.migration.DowntimeMillis)
}

// leftByMigration reports whether the guest left by a completed migration.
func (g *guest) leftByMigration() bool {
	return g.migration != nil && g.migration.Role == launcherv1.MigrationSource && g.migration.Phase == launcherv1.MigrationCompleted
}

// cancelMigration aborts the running migration.
func (g *guest) cancelMigration() error {
	if !g.migrating {
		return fmt.Errorf("%w: no migration is running", errConflict)
	}
	if err := g.dom.AbortJob(); err != nil {
		return fmt.Errorf("abort the migration: %w", err)
	}
	return nil
}

// copiedDisks are the disks block migration copies: every writable file-backed disk (container
// disk overlays, empty disks); read-only and shareable ones are the same on both sides.
func copiedDisks(def *libvirtxml.Domain) []string {
	if def.Devices == nil {
		return nil
	}
	var out []string
	for _, d := range def.Devices.Disks {
		if d.Device != "disk" || d.ReadOnly != nil || d.Shareable != nil || d.Source == nil || d.Source.File == nil || d.Target == nil {
			continue
		}
		out = append(out, d.Target.Dev)
	}
	return out
}

// migrationStatus is a copy of the migration's status for publishing.
func (g *guest) migrationStatus() *launcherv1.MigrationStatus {
	if g.migration == nil {
		return nil
	}
	m := *g.migration
	return &m
}

// errMigrationTarget refuses a sync on a migration target: its guest arrives by migration.
var errMigrationTarget = errors.New("this launcher is a migration target: its guest arrives by migration")

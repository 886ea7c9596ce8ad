package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
)

// Freezing the guest's file systems (the freeze subresource): the agent freezes them, and the
// launcher thaws them when the unfreeze timeout passes, as KubeVirt does. The loop owns the state:
// frozen (what the status says), freezing (freezes under way: no migration meanwhile), freezeGen
// (bumped whenever the state changes, so an answer about an older state is dropped) and the thaw
// timer. Every call to the agent runs off the loop.

// thawRetry is how soon a failed thaw is tried again; maxThawTries how often before the launcher
// stops counting the guest as frozen (its agent keeps refusing: migration and drains must not stay
// blocked by a guest).
const (
	thawRetry    = 30 * time.Second
	maxThawTries = 5
)

// freezeOutcome is how a freeze ended (opFreezeDone).
type freezeOutcome int

const (
	freezeSkipped freezeOutcome = iota // nothing was asked of the agent
	freezeOK                           // frozen: thawed at the unfreeze timeout
	freezeFailed                       // the agent failed or timed out: maybe frozen, thawed at once
)

// freeze freezes the guest's file systems; the loop thaws them after the timeout.
func (g *guest) freeze(ctx context.Context, req launcherv1.FreezeRequest) error {
	timeout := req.UnfreezeTimeoutSeconds
	switch {
	case timeout == 0:
		timeout = launcherv1.DefaultUnfreezeTimeoutSeconds
	case timeout < 0 || timeout > launcherv1.MaxUnfreezeTimeoutSeconds:
		return fmt.Errorf("%w: unfreezeTimeoutSeconds: must be between 1 and %d, got %d", errBadRequest, launcherv1.MaxUnfreezeTimeoutSeconds, timeout)
	}
	grace := time.Duration(timeout) * time.Second
	// Frozen already: the freeze stands, with the new timeout (KubeVirt's freeze is idempotent).
	if err := g.do(ctx, request{op: opFreezeAgain, grace: grace}); !errors.Is(err, errNotFrozen) {
		return err
	}
	dom, err := g.agentDomain(ctx, forFreeze) // counted in freezing by the loop
	if err != nil {
		return err
	}
	defer func() { _ = dom.Free() }()
	done := request{op: opFreezeDone, outcome: freezeSkipped, grace: grace}
	if err = ctx.Err(); err == nil {
		if err = dom.FSFreeze(nil, 0); err == nil {
			done.outcome = freezeOK
		} else {
			done.outcome, err = freezeFailed, agentError("freeze", err)
		}
	}
	if derr := g.do(context.WithoutCancel(ctx), done); err == nil {
		err = derr
	}
	return err
}

// unfreeze thaws the guest's file systems.
func (g *guest) unfreeze(ctx context.Context) error {
	dom, err := g.agentDomain(ctx, forQuery)
	if err != nil {
		return err
	}
	defer func() { _ = dom.Free() }()
	if err := dom.FSThaw(nil, 0); err != nil {
		return agentError("thaw", err)
	}
	return g.do(context.WithoutCancel(ctx), request{op: opThawed})
}

// errNotFrozen answers opFreezeAgain when the guest is not frozen (or a freeze is under way).
var errNotFrozen = errors.New("not frozen")

// freezeOp is the loop's part of a freeze request (opFreezeAgain, opFreezeDone, opThawed, opThawFailed).
func (g *guest) freezeOp(r request) error {
	stale := r.freezeGen != 0 && r.freezeGen != g.freezeGen
	switch {
	case r.op == opFreezeAgain:
		if !g.frozen || g.freezing > 0 {
			return errNotFrozen
		}
		g.armThaw(r.grace)
	case r.op == opFreezeDone:
		g.freezing--
		if r.outcome == freezeSkipped {
			return nil
		}
		g.frozen, g.thawTries = true, 0
		g.freezeGen++
		if r.outcome == freezeFailed {
			g.thawInBackground()
			return nil
		}
		g.armThaw(r.grace)
	case stale: // about a state that has changed since: a newer freeze, a thaw, a reset
	case r.op == opThawed:
		g.notFrozen()
	case r.op == opThawFailed:
		g.thawTries++
		if g.thawTries >= maxThawTries {
			g.cfg.Log.Error("The guest agent did not thaw the guest's file systems: no longer counting them as frozen", "tries", g.thawTries)
			g.notFrozen()
			return nil
		}
		g.armThaw(thawRetry)
	}
	return nil
}

// armThaw (re)starts the thaw timer.
func (g *guest) armThaw(after time.Duration) {
	if g.thaw != nil {
		g.thaw.Stop()
	}
	g.thaw = time.NewTimer(after)
}

// notFrozen forgets a freeze: thawed on request or by the launcher, or by a reset.
func (g *guest) notFrozen() {
	g.frozen, g.thawTries = false, 0
	g.freezeGen++
	if g.thaw != nil {
		g.thaw.Stop()
		g.thaw = nil
	}
}

// thawInBackground thaws the guest's file systems on a goroutine of agentCalls (the unfreeze timeout
// passed, or a freeze failed); its answer counts only for the state it was started in.
func (g *guest) thawInBackground() {
	g.thaw = nil
	if err := g.dom.Ref(); err != nil {
		g.armThaw(thawRetry)
		return
	}
	d, gen := *g.dom, g.freezeGen
	g.agentCalls.Add(1)
	go func() {
		defer g.agentCalls.Done()
		defer func() { _ = d.Free() }()
		next := request{op: opThawed, freezeGen: gen}
		if err := thaw(&d); err != nil {
			g.cfg.Log.Error("Thawing the guest's file systems failed: trying again", "err", err, "in", thawRetry)
			next.op = opThawFailed
		}
		_ = g.do(context.Background(), next) // fails at once once the loop has ended
	}()
}

// thaw asks the agent to thaw every file system.
func thaw(d *libvirt.Domain) error {
	if err := d.AgentSetResponseTimeout(agentTimeoutSeconds, 0); err != nil {
		return err
	}
	if err := d.FSThaw(nil, 0); err != nil {
		return agentError("thaw", err)
	}
	return nil
}

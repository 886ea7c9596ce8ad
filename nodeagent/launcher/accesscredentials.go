package launcher

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/termsafe"
	"github.com/podvirt/podvirt/nodeagent/launcher/credentials"
)

// credentialPeriod is how often the Secrets of accessCredentials are read again (the kubelet
// refreshes mounted Secrets within about a minute); only a change reaches the guest agent, and
// every credentialResync everything is sent again (what the guest's users changed is undone, as
// KubeVirt does). After a failure the next try waits twice as long, up to credentialResync.
const (
	credentialPeriod = 10 * time.Second
	credentialResync = 5 * time.Minute
)

// startCredentialSync starts, once, the goroutine that keeps the guest in step with the
// accessCredentials propagated through the guest agent (on the loop, when the agent first connects).
// It is one of agentCalls and ends when the loop does. A spec that does not pass the API's checks
// (one that slipped past admission) is not propagated at all.
func (g *guest) startCredentialSync() {
	if g.credSync || g.vmi == nil || !slices.ContainsFunc(g.vmi.Spec.AccessCredentials, func(c virtv1.AccessCredential) bool { return c.ThroughAgent() }) {
		return
	}
	g.credSync = true
	if errs := g.vmi.Spec.AccessCredentialErrors(field.NewPath("spec", "accessCredentials")); len(errs) > 0 {
		g.setCredentialSync(false, errs.ToAggregate().Error())
		return
	}
	creds := slices.Clone(g.vmi.Spec.AccessCredentials)
	g.agentCalls.Add(1)
	go func() {
		defer g.agentCalls.Done()
		syncer, since := credentials.NewSyncer(), time.Now()
		wait := credentialPeriod
		for {
			if time.Since(since) >= credentialResync {
				syncer, since = credentials.NewSyncer(), time.Now()
			}
			if g.syncCredentials(syncer, creds) {
				wait = credentialPeriod
			} else {
				wait = min(2*wait, credentialResync)
			}
			select {
			case <-g.done:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// syncCredentials reads the Secrets and sends the guest agent what changed; the outcome is what the
// next status carries. While the agent is away nothing is sent and the last outcome stands. It
// reports whether nothing failed.
func (g *guest) syncCredentials(syncer *credentials.Syncer, creds []virtv1.AccessCredential) bool {
	want, readErr := credentials.WantFor(creds, credentials.MountedSecrets(g.cfg.SecretsDir))
	if syncer.InStep(want) {
		if readErr != nil {
			g.setCredentialSync(false, readErr.Error())
		}
		return readErr == nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentFetchTimeout)
	defer cancel()
	dom, err := g.agentDomain(ctx, forQuery)
	switch {
	case errors.Is(err, errNoAgent):
		return true
	case err != nil:
		g.setCredentialSync(false, err.Error())
		return false
	}
	defer func() { _ = dom.Free() }()
	if err := errors.Join(readErr, syncer.Sync(ctx, credentialAgent{dom}, want)); err != nil {
		g.setCredentialSync(false, err.Error())
		return false
	}
	g.setCredentialSync(true, "the guest holds the keys and passwords of its accessCredentials")
	return true
}

// setCredentialSync records the outcome for the status (bounded and made safe to print: parts of it
// come from the guest), and logs a failure when it is news.
func (g *guest) setCredentialSync(ok bool, msg string) {
	st := &launcherv1.CredentialSync{Synchronized: ok, Message: termsafe.Line(bound(msg))}
	if old := g.credState.Swap(st); !ok && (old == nil || *old != *st) {
		g.cfg.Log.Warn("Access credentials not propagated", "err", st.Message)
	}
}

// credentialAgent is credentials.Agent on one domain's guest agent.
type credentialAgent struct{ dom *libvirt.Domain }

func (a credentialAgent) SetAuthorizedKeys(_ context.Context, user string, keys []string) error {
	var none struct{}
	return agentCommand(a.dom, "guest-ssh-add-authorized-keys", map[string]any{"username": user, "keys": keys, "reset": true}, &none)
}

func (a credentialAgent) RemoveAuthorizedKeys(_ context.Context, user string, keys []string) error {
	var none struct{}
	return agentCommand(a.dom, "guest-ssh-remove-authorized-keys", map[string]any{"username": user, "keys": keys}, &none)
}

func (a credentialAgent) SetPassword(_ context.Context, user, password string) error {
	var none struct{}
	return agentCommand(a.dom, "guest-set-user-password", map[string]any{
		"username": user, "password": base64.StdEncoding.EncodeToString([]byte(password)), "crypted": false,
	}, &none)
}

package launcher

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"time"

	"libvirt.org/go/libvirt"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
	"github.com/podvirt/podvirt/internal/termsafe"
	"github.com/podvirt/podvirt/nodeagent/launcher/credentials"
)

// credentialPeriod is how often the Secrets of accessCredentials are read again (the kubelet
// refreshes mounted Secrets about once a minute); only a change reaches the guest agent.
const credentialPeriod = 10 * time.Second

// startCredentialSync starts, once, the goroutine that keeps the guest in step with the
// accessCredentials propagated through the guest agent (on the loop, when the agent first connects).
// It is one of agentCalls and ends when the loop does.
func (g *guest) startCredentialSync() {
	if g.credSync || g.vmi == nil || !slices.ContainsFunc(g.vmi.Spec.AccessCredentials, func(c virtv1.AccessCredential) bool { return c.ThroughAgent() }) {
		return
	}
	g.credSync = true
	creds := slices.Clone(g.vmi.Spec.AccessCredentials)
	g.agentCalls.Add(1)
	go func() {
		defer g.agentCalls.Done()
		syncer := credentials.NewSyncer()
		tick := time.NewTicker(credentialPeriod)
		defer tick.Stop()
		for {
			g.syncCredentials(syncer, creds)
			select {
			case <-g.done:
				return
			case <-tick.C:
			}
		}
	}()
}

// syncCredentials reads the Secrets and sends the guest agent what changed; the outcome is what the
// next status carries. While the agent is away nothing is sent and the last outcome stands.
func (g *guest) syncCredentials(syncer *credentials.Syncer, creds []virtv1.AccessCredential) {
	want, err := credentials.WantFor(creds, credentials.MountedSecrets(g.cfg.SecretsDir))
	if err != nil {
		g.setCredentialSync(false, err.Error())
		return
	}
	if syncer.InStep(want) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentFetchTimeout)
	defer cancel()
	dom, err := g.agentDomain(ctx, forQuery)
	switch {
	case errors.Is(err, errNoAgent):
		return
	case err != nil:
		g.setCredentialSync(false, err.Error())
		return
	}
	defer func() { _ = dom.Free() }()
	if err := syncer.Sync(ctx, credentialAgent{dom}, want); err != nil {
		g.setCredentialSync(false, err.Error())
		return
	}
	g.setCredentialSync(true, "the guest holds the keys and passwords of its accessCredentials")
}

// setCredentialSync records the outcome for the status (the message bounded and made safe to print:
// parts of it come from the guest).
func (g *guest) setCredentialSync(ok bool, msg string) {
	g.credState.Store(&launcherv1.CredentialSync{Synchronized: ok, Message: termsafe.Line(bound(msg))})
	if !ok {
		g.cfg.Log.Warn("Access credentials not propagated", "err", msg)
	}
}

// credentialAgent is credentials.Agent on one domain's guest agent.
type credentialAgent struct{ dom *libvirt.Domain }

func (a credentialAgent) AddAuthorizedKeys(_ context.Context, user string, keys []string) error {
	var none struct{}
	return agentCommand(a.dom, "guest-ssh-add-authorized-keys", map[string]any{"username": user, "keys": keys, "reset": false}, &none)
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

package launcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	"github.com/podvirt/podvirt/internal/boottime"
)

// kubeletCheck asks virt-api for this node's kubelet lease while the node agent is silent (rule 3
// of docs/node-loss.md, launcherv1.KubeletLeasePath) and publishes since when the kubelet is known
// to be alive (launcherv1.KubeletSeen), for fenceIfAlone. Where to ask comes with the agent's syncs
// (configure); without it nothing is asked and the agent's silence alone fences, as before.
type kubeletCheck struct {
	// tokenFile is the projected token (read again at every call: the kubelet rotates it).
	tokenFile string
	// silent is how long the agent has been silent; limit the launcher's FenceAfter.
	silent func() time.Duration
	limit  time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	url    string
	digest string
	client *http.Client

	seen  launcherv1.KubeletSeen // owned by run
	alive atomic.Int64           // seen.Alive (boottime), 0: never
	// overdue latches once launcherv1.Fence held before an answer moved seen.Alive on: the guest
	// must go, even if the guest's loop was too busy to notice in time, whatever comes after.
	overdue atomic.Bool
}

func newKubeletCheck(cfg *Config, silent func() time.Duration) *kubeletCheck {
	dir := cfg.KubeletTokenDir
	if dir == "" {
		dir = launcherv1.KubeletTokenDir
	}
	return &kubeletCheck{tokenFile: filepath.Join(dir, launcherv1.KubeletTokenFile), silent: silent, limit: cfg.FenceAfter, log: cfg.Log}
}

// configure takes where to ask from a sync of the agent (never from another caller: whoever names
// the server decides whether the guest is fenced). A NodeCheck that does not parse is refused and
// the previous one kept.
func (k *kubeletCheck) configure(nc *launcherv1.NodeCheck) error {
	if nc == nil {
		return nil
	}
	u, err := url.Parse(nc.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return fmt.Errorf("nodeCheck.url: %q is not an https URL", nc.URL)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(nc.CA) {
		return errors.New("nodeCheck.ca: holds no certificate")
	}
	client := &http.Client{
		Timeout: launcherv1.KubeletCheckTimeout,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: nc.ServerName},
			Proxy:               nil, // never through a proxy the Pod's environment names
			TLSHandshakeTimeout: launcherv1.KubeletCheckTimeout,
			MaxIdleConns:        1,
			IdleConnTimeout:     2 * launcherv1.KubeletCheckInterval,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		k.client.CloseIdleConnections()
	}
	if d := nc.Digest(); d != k.digest {
		k.log.Info("The kubelet check asks virt-api while the node agent is silent", "url", nc.URL, "serverName", nc.ServerName, "digest", d)
	}
	k.url, k.digest, k.client = u.JoinPath(launcherv1.KubeletLeasePath).String(), nc.Digest(), client
	return nil
}

// configured is the Digest of where the check asks ("" before a sync or the agent said).
func (k *kubeletCheck) configured() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.digest
}

// fenceDue is launcherv1.Fence for the agent's silence and the kubelet's sightings now, or a fence
// that fell due earlier (overdue).
func (k *kubeletCheck) fenceDue(silent time.Duration) bool {
	if k.overdue.Load() {
		return true
	}
	sinceKubelet, known := k.aliveSince(boottime.Now())
	return launcherv1.Fence(k.limit, silent, sinceKubelet, known)
}

// latchIfDue latches the fence (overdue) when it is due for the agent's silence now.
func (k *kubeletCheck) latchIfDue(silent time.Duration) {
	if k.limit > 0 && k.fenceDue(silent) {
		k.overdue.Store(true)
	}
}

// aliveSince is how long ago the kubelet was last known alive, and whether it ever was.
func (k *kubeletCheck) aliveSince(now time.Duration) (time.Duration, bool) {
	a := k.alive.Load()
	if a == 0 {
		return 0, false
	}
	return now - time.Duration(a), true
}

// run asks every KubeletCheckInterval while the agent has been silent for KubeletCheckAfter, until
// ctx ends.
func (k *kubeletCheck) run(ctx context.Context) {
	tick := time.NewTicker(launcherv1.KubeletCheckInterval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if k.silent() < launcherv1.KubeletCheckAfter {
			continue
		}
		start := boottime.Now()
		renewal, err := k.ask(ctx)
		if err != nil {
			if !failing && ctx.Err() == nil {
				k.log.Warn("The node agent is silent and virt-api does not tell whether the kubelet is alive", "err", err)
			}
			failing = true
			continue
		}
		failing = false
		k.latchIfDue(k.silent())
		before := k.seen.Alive
		k.seen = k.seen.Observe(renewal, start)
		k.alive.Store(int64(k.seen.Alive))
		if before == 0 && k.seen.Alive != 0 {
			k.log.Info("The node agent is silent but the node's kubelet renews its lease: the guest keeps running", "agentSilentFor", k.silent().Round(time.Second).String())
		}
	}
}

// errNotConfigured: no sync has said where to ask.
var errNotConfigured = errors.New("no sync named virt-api")

// ask makes one call: the node's kubelet lease renewal as virt-api read it.
func (k *kubeletCheck) ask(ctx context.Context) (string, error) {
	k.mu.Lock()
	u, client := k.url, k.client
	k.mu.Unlock()
	if client == nil {
		return "", errNotConfigured
	}
	token, err := readBounded(k.tokenFile, launcherv1.MaxKubeletLeaseBody)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	body, err := json.Marshal(launcherv1.KubeletLeaseRequest{Token: string(bytes.TrimSpace(token))})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, launcherv1.KubeletCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, launcherv1.MaxKubeletLeaseBody+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("read the answer: %w", err)
	case len(data) > launcherv1.MaxKubeletLeaseBody:
		return "", fmt.Errorf("answer longer than %d bytes", launcherv1.MaxKubeletLeaseBody)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("virt-api answered %s: %s", resp.Status, bytes.TrimSpace(data[:min(len(data), 512)]))
	}
	var out launcherv1.KubeletLeaseResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return "", fmt.Errorf("answer: %w", err)
	}
	if out.Renewal == "" {
		return "", fmt.Errorf("node %s has no kubelet lease", out.Node)
	}
	return out.Renewal, nil
}

// readBounded reads at most limit bytes of a regular file (a token the kubelet wrote into the
// container's read-only projected volume). Not launcherclient.ReadBeneath: the kubelet's token is a
// symlink into its ..data directory, which that privileged reader's no-link rule refuses.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: longer than %d bytes", path, limit)
	}
	return data, nil
}

package v1

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// DefaultPort is the port the agent serves its paths on, on its node's address (mutual TLS).
const DefaultPort = 8186

// instancePath is where an instance's calls live on the agent; its subresource's name follows.
const instancePath = "/v1/namespaces/{namespace}/virtualmachineinstances/{name}/"

// Subresource paths virt-api forwards to the agent of an instance's node, as KubeVirt's virt-api does
// to virt-handler, named as in subv1.Table; fill them in with Path.
const (
	PathPause   = instancePath + subv1.Pause
	PathUnpause = instancePath + subv1.Unpause
	// PathConsole is a websocket (console.Subprotocol) onto the guest's serial console, shared by
	// every viewer.
	PathConsole = instancePath + subv1.Console
	// PathSoftReboot asks for an ACPI reboot of the guest.
	PathSoftReboot = instancePath + subv1.SoftReboot
	// PathReset asks for a hard reset of the guest (the reset button: no shutdown first).
	PathReset = instancePath + subv1.Reset
	// PathVNC is a websocket onto the guest's VNC display (one connection per viewer).
	PathVNC = instancePath + subv1.VNC
	// PathGuestAgentInfo (GET) answers what the guest agent reports (virtv1.VirtualMachineInstanceGuestAgentInfo):
	// virt-api's guestosinfo, userlist and filesystemlist.
	PathGuestAgentInfo = instancePath + subv1.GuestOSInfo
	// PathFreeze (PUT, body virtv1.FreezeUnfreezeTimeout) and PathUnfreeze freeze and thaw the guest's file systems.
	PathFreeze   = instancePath + subv1.Freeze
	PathUnfreeze = instancePath + subv1.Unfreeze
	// PathExec (POST, body subv1.ExecRequest) runs a command in the guest: subv1.ExecResult.
	PathExec = instancePath + subv1.Exec
	// PathPortForward is a websocket carrying one TCP connection to the guest's port {port}.
	PathPortForward = instancePath + subv1.PortForward + "/{port}"
)

// PathMigrationStream carries one connection to a migration socket ({socket}) of the target launcher
// Pod {pod} on the agent's node: GET with "Upgrade: tcp", answered 101, then raw bytes. Only the
// holders of the node agents' certificate get here.
const PathMigrationStream = "/v1/namespaces/{namespace}/migrationtargets/{pod}/{socket}"

// Path fills in an instance path's {namespace} and {name}.
func Path(tmpl, namespace, name string) string {
	return strings.NewReplacer("{namespace}", namespace, "{name}", name).Replace(tmpl)
}

// MigrationStreamPath is PathMigrationStream filled in.
func MigrationStreamPath(namespace, pod, socket string) string {
	return strings.NewReplacer("{namespace}", namespace, "{pod}", pod, "{socket}", socket).Replace(PathMigrationStream)
}

// ParsePort reads a port-forward path's port: a TCP port number 1-65535.
func ParsePort(s string) (int, error) {
	port, err := strconv.Atoi(s)
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("port: %q is not a TCP port number (1-65535)", s)
	}
	return port, nil
}

// CACertKey is the CA certificate's key in the certificate Secrets virt-api maintains.
const CACertKey = "ca.crt"

// KeyPair reads virt-api's client certificate towards the agents as virt-api keeps it (a Secret's
// data, or the same keys as files): the key pair of tls.crt and tls.key, and the Roots.
func KeyPair(data map[string][]byte) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%s/%s: %w", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	pool, err := Roots(data)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return cert, pool, nil
}

// Roots reads the node CA (CACertKey) of a Secret's data: the one parser of it, for the agents and
// virt-api.
func Roots(data map[string][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[CACertKey]) {
		return nil, fmt.Errorf("%s holds no certificate", CACertKey)
	}
	return pool, nil
}

// CertSecret is the Secret (in Podvirt's namespace) that virt-api fills with the node CA's
// certificate (CACertKey; never a key) and the CA of its own serving certificate (VirtAPICAKey); the
// agents may read only it.
const CertSecret = "virt-handler-certs"

// VirtAPICAKey holds the CA virt-api's serving certificate chains to, which launchers need to ask
// virt-api for their node's kubelet lease (launcherv1.NodeCheck).
const VirtAPICAKey = "virt-api-ca.crt"

// VirtAPIService is virt-api's Service (in Podvirt's namespace): launchers reach it at its cluster
// IP (clusters without cluster DNS, Pods with a DNS config of their own) and check its certificate
// for VirtAPIServerName.
const VirtAPIService = "virt-api"

// VirtAPIServerName is the name virt-api's serving certificate is for, in namespace.
func VirtAPIServerName(namespace string) string { return VirtAPIService + "." + namespace + ".svc" }

// Event reasons of a migration, on the instance.
const (
	EventMigrationStarted = "MigrationStarted"
	EventMigrated         = "Migrated"
	EventMigrationFailed  = "MigrationFailed"
)

// PathPeerContact is where an agent asks another node's agent whether it too has lost the
// control plane (GET, node identities only; heartbeatv1 has the rules). The answer is a
// PeerContact, at most MaxPeerContactBytes.
const PathPeerContact = "/v1/peers/contact"

// PeerContact is an agent's answer on PathPeerContact.
type PeerContact struct {
	// CutOff: the answering agent's own last heartbeat renewal is older than heartbeatv1.LapseGap
	// (or it has not renewed since it started), and its next renewal marks its lease.
	CutOff bool `json:"cutOff"`
}

// MaxPeerContactBytes bounds a PeerContact answer as read.
const MaxPeerContactBytes = 1024

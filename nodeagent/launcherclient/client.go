// Package launcherclient is the node agent's client for the launcher's command protocol v1
// (api/launcher/v1): HTTP/1.1 with JSON bodies over the unix socket launcherv1.CommandSocket in the
// launcher's private directory, which the agent reaches from the node through the kubelet's emptyDir
// path (launcherv1.HostPrivateDir).
//
// Those host paths are longer than a unix socket address may be (108 bytes on Linux), so the client
// dials through /proc/self/fd/N/launcher.sock, where N is the private directory opened with O_PATH.
package launcherclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	launcherv1 "github.com/podvirt/podvirt/api/launcher/v1"
	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
	virtv1 "github.com/podvirt/podvirt/api/v1"
)

// ErrUnreachable is wrapped by every error that means no launcher answers on the socket: the socket
// does not exist yet (the launcher is starting) or any more (it exited), or nobody accepts on it.
var ErrUnreachable = errors.New("launcher unreachable")

// maxSocketPath is the longest path a unix socket address holds (sun_path is 108 bytes with a NUL).
const maxSocketPath = 107

// DefaultTimeout bounds each call whose context has no earlier deadline. Sync gets SyncTimeout: the
// launcher's first sync defines and starts the domain, which includes libvirt's capability probe.
const (
	DefaultTimeout = 15 * time.Second
	SyncTimeout    = 2 * time.Minute
)

// Error is a non-2xx reply from the launcher.
type Error struct {
	// Path is the request path (e.g. /v1/pause).
	Path string
	// StatusCode is the HTTP status the launcher answered with.
	StatusCode int
	// Message is the launcher's explanation (launcherv1.Error), or the raw body.
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("launcher %s: %d %s: %s", e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// replyError is the *Error of a non-2xx reply with body raw.
func replyError(path string, code int, raw []byte) *Error {
	e := &Error{Path: path, StatusCode: code, Message: string(bytes.TrimSpace(raw))}
	var le launcherv1.Error
	if json.Unmarshal(raw, &le) == nil && le.Message != "" {
		e.Message = le.Message
	}
	e.Message = launcherv1.BoundedMessage(e.Message) // it reaches the instance's conditions
	return e
}

// Client talks to one launcher. It holds no connection between calls; the zero value is not usable.
type Client struct {
	dir  string
	http *http.Client
}

// New returns a client for the launcher whose private directory (launcherv1.PrivateDir, as seen from
// here) is dir; the command socket is dir/launcherv1.CommandSocket.
func New(dir string) *Client {
	c := &Client{dir: dir}
	c.http = &http.Client{Transport: &http.Transport{
		DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return c.dial(ctx) },
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: MaxHeaderBytes,
	}}
	return c
}

// MaxHeaderBytes bounds the headers of a launcher's reply (its replies carry a few short ones).
const MaxHeaderBytes = 64 << 10

// MaxReplyBytes bounds the body of a launcher's reply (a status, an error) and of an upgrade's refusal.
const MaxReplyBytes = 1 << 20

// headerLimit reads at most n bytes from r until lifted: the response header of an upgrade is
// bounded, the stream after it is not.
type headerLimit struct {
	r      io.Reader
	n      int64
	lifted bool
}

func (h *headerLimit) Read(p []byte) (int, error) {
	if h.lifted {
		return h.r.Read(p)
	}
	if h.n <= 0 {
		return 0, fmt.Errorf("reply headers longer than %d bytes", MaxHeaderBytes)
	}
	if int64(len(p)) > h.n {
		p = p[:h.n]
	}
	n, err := h.r.Read(p)
	h.n -= int64(n)
	return n, err
}

// SocketPath is the command socket's path.
func (c *Client) SocketPath() string { return filepath.Join(c.dir, launcherv1.CommandSocket) }

// dial connects to the command socket.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	return DialSocket(ctx, c.dir, launcherv1.CommandSocket)
}

// SerialConsole connects to the guest's serial console socket (launcherv1.SerialSocket).
func (c *Client) SerialConsole(ctx context.Context) (net.Conn, error) {
	return DialSocket(ctx, c.dir, launcherv1.SerialSocket)
}

// VNC connects to the guest's VNC display socket (launcherv1.VNCSocket).
func (c *Client) VNC(ctx context.Context) (net.Conn, error) {
	return DialSocket(ctx, c.dir, launcherv1.VNCSocket)
}

// Reboot asks for an ACPI reboot of the guest.
func (c *Client) Reboot(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathReboot, nil, nil, DefaultTimeout)
}

// Reset asks for a hard reset of the guest.
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathReset, nil, nil, DefaultTimeout)
}

// GuestAgentInfo is what the guest agent reports.
func (c *Client) GuestAgentInfo(ctx context.Context) (*virtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	var info virtv1.VirtualMachineInstanceGuestAgentInfo
	if err := c.do(ctx, http.MethodGet, launcherv1.PathGuestAgentInfo, nil, &info, DefaultTimeout); err != nil {
		return nil, err
	}
	return &info, nil
}

// Freeze freezes the guest's file systems until Unfreeze or the request's timeout.
func (c *Client) Freeze(ctx context.Context, req launcherv1.FreezeRequest) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathFreeze, req, nil, DefaultTimeout)
}

// Unfreeze thaws the guest's file systems.
func (c *Client) Unfreeze(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathUnfreeze, nil, nil, DefaultTimeout)
}

// Exec runs a command in the guest and waits for it to exit (its timeout, and ExecGrace more).
func (c *Client) Exec(ctx context.Context, req *subv1.ExecRequest) (*subv1.ExecResult, error) {
	var res subv1.ExecResult
	if err := c.do(ctx, http.MethodPost, launcherv1.PathExec, req, &res, launcherv1.ExecTimeout(req)+launcherv1.ExecGrace); err != nil {
		return nil, err
	}
	return &res, nil
}

// PortForward connects to the guest's TCP port through the launcher (launcherv1.PathPortForward):
// the returned connection carries the bytes of that one TCP connection.
func (c *Client) PortForward(ctx context.Context, port int) (net.Conn, error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	path := launcherv1.PathPortForward + strconv.Itoa(port)
	upgraded, err := Upgrade(ctx, conn, "launcher", path)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return upgraded, nil
}

// Upgrade sends GET path with "Upgrade: tcp" to host on conn and reads the 101 that turns conn into
// a plain byte stream (bounded by DefaultTimeout); any other answer is an *Error. The launcher's
// port-forward and the node agents' migration streams use it.
func Upgrade(ctx context.Context, conn net.Conn, host, path string) (net.Conn, error) {
	deadline := time.Now().Add(DefaultTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build %s request: %w", path, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", launcherv1.UpgradeTCP)
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("%s %s: %w", host, path, err)
	}
	limit := &headerLimit{r: conn, n: MaxHeaderBytes}
	br := bufio.NewReader(limit)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", host, path, err)
	}
	limit.lifted = true
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer func() { _ = resp.Body.Close() }()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes))
		return nil, replyError(path, resp.StatusCode, raw)
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the response reader already buffered before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite half-closes the connection: the guest's side sees EOF and may still answer.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return b.Conn.Close()
}

// DialSocket connects to the unix socket name (relative to dir, e.g. "migration/memory.sock") in
// the launcher's private directory dir. Nothing below dir is followed as a symlink: the launcher
// owns what is in dir and must not redirect the agent, which runs as root, to another socket of
// the node. The socket is opened O_PATH and reached through /proc/self/fd, which also lifts the
// 108-byte limit of socket addresses (the kubelet's emptyDir paths are longer).
func DialSocket(ctx context.Context, dir, name string) (net.Conn, error) {
	fd, err := openBeneath(dir, name, unix.O_PATH)
	if err != nil {
		return nil, classify(fmt.Errorf("open %s: %w", filepath.Join(dir, name), err))
	}
	defer func() { _ = unix.Close(fd) }()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, classify(fmt.Errorf("dial %s: %w", filepath.Join(dir, name), err))
	}
	return conn, nil
}

// openBeneath opens name below dir (dir itself is the kubelet's, trusted) without following any
// symlink and without leaving dir.
func openBeneath(dir, name string, flags int) (int, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer func() { _ = unix.Close(dfd) }()
	return unix.Openat2(dfd, name, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
}

// ListenSocket creates the unix socket name (relative to dir; its directory is created when
// missing) in the launcher's private directory dir and gives it to uid:gid, replacing whatever
// was there, without following any symlink below dir. Closing the listener does not remove it:
// RemoveSocket does.
func ListenSocket(dir, name string, uid, gid int) (net.Listener, error) {
	path := filepath.Join(dir, name)
	sfd, base, err := parentBeneath(dir, name, true)
	if err != nil {
		return nil, fmt.Errorf("open the directory of %s: %w", path, err)
	}
	defer func() { _ = unix.Close(sfd) }()
	if err := unlinkAt(sfd, base); err != nil {
		return nil, fmt.Errorf("remove stale %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/%s", sfd, base), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	if err := unix.Fchownat(sfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("hand %s to %d:%d: %w", path, uid, gid, err)
	}
	return ln, nil
}

// RemoveSocket removes the socket name (relative to dir) without following symlinks below dir.
func RemoveSocket(dir, name string) error {
	sfd, base, err := parentBeneath(dir, name, false)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(sfd) }()
	return unlinkAt(sfd, base)
}

// parentBeneath opens the directory that holds name (relative to dir; at most one level below it,
// created first with create) without following symlinks, and returns it with name's last element.
func parentBeneath(dir, name string, create bool) (int, string, error) {
	sub, base := filepath.Split(name)
	sub = filepath.Clean(sub) // "." when name has no directory
	if create && sub != "." {
		dfd, err := openBeneath(dir, ".", unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return -1, "", err
		}
		err = unix.Mkdirat(dfd, sub, 0o755)
		_ = unix.Close(dfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, "", err
		}
	}
	sfd, err := openBeneath(dir, sub, unix.O_PATH|unix.O_DIRECTORY)
	return sfd, base, err
}

// unlinkAt removes base in the directory dfd; a missing one is no error.
func unlinkAt(dfd int, base string) error {
	if err := unix.Unlinkat(dfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// classify marks the errors that mean "no launcher there" with ErrUnreachable.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// maxExitFile bounds the exit file the agent reads: a launcherv1.Status is a few hundred bytes.
const maxExitFile = 64 << 10

// ExitStatus is the status the launcher left in launcherv1.ExitFile when it exited; nil while no
// such file exists (the launcher runs, or is still starting). The launcher owns the file, so it is
// read as ReadBeneath reads: no link followed, a regular file only, at most maxExitFile bytes.
func (c *Client) ExitStatus() (*launcherv1.Status, error) {
	raw, err := ReadBeneath(c.dir, launcherv1.ExitFile, maxExitFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read launcher exit status: %w", err)
	}
	var st launcherv1.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decode launcher exit status %s: %w", launcherv1.ExitFile, err)
	}
	st = st.Bounded()
	return &st, nil
}

// ReadBeneath reads the file name below dir, a directory someone else (a launcher) can write, as a
// privileged reader must: no symlink followed and never out of dir (openat2), opened non-blocking so
// a FIFO cannot hang the caller, refused unless it is a regular file with one link (not a hard link
// to a file of the node), and refused when it holds more than limit bytes (never read past limit+1).
// A missing file is fs.ErrNotExist.
func ReadBeneath(dir, name string, limit int64) ([]byte, error) {
	path := filepath.Join(dir, name)
	fd, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file (mode %#o): refused", path, st.Mode&unix.S_IFMT)
	}
	if st.Nlink != 1 { // a hard link to a file of the node the launcher may not read
		return nil, fmt.Errorf("%s has %d links: refused", path, st.Nlink)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	case int64(len(data)) > limit:
		return nil, fmt.Errorf("%s holds more than %d bytes, the limit: refused", path, limit)
	}
	return data, nil
}

// Ping returns the protocol version the launcher speaks.
func (c *Client) Ping(ctx context.Context) (string, error) {
	var reply struct {
		Version string `json:"version"`
	}
	if err := c.do(ctx, http.MethodGet, launcherv1.PathPing, nil, &reply, DefaultTimeout); err != nil {
		return "", err
	}
	return reply.Version, nil
}

// Sync hands the launcher its VMI; it defines and starts the domain if it is not yet.
func (c *Client) Sync(ctx context.Context, req launcherv1.SyncRequest) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodPost, launcherv1.PathSync, req, SyncTimeout)
}

// PrepareTarget makes the launcher a migration target for its VMI: it prepares the instance's
// files and waits for the guest to arrive (launcherv1.PathMigrationTarget).
func (c *Client) PrepareTarget(ctx context.Context, req launcherv1.SyncRequest) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodPost, launcherv1.PathMigrationTarget, req, SyncTimeout)
}

// Migrate starts the live migration of the guest to the target reached through the sockets in
// launcherv1.MigrationDir (launcherv1.PathMigrate); Status follows it.
func (c *Client) Migrate(ctx context.Context, req launcherv1.MigrateRequest) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodPost, launcherv1.PathMigrate, req, DefaultTimeout)
}

// CancelMigration aborts the running migration: the guest stays (launcherv1.PathMigrateCancel).
func (c *Client) CancelMigration(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathMigrateCancel, nil, nil, DefaultTimeout)
}

// vouchedUntilKey keys the boot time until which the agent vouches (WithVouchedUntil).
type vouchedUntilKey struct{}

// WithVouchedUntil makes every request made with ctx say that the agent vouches until until (a
// CLOCK_BOOTTIME reading; launcherv1.HeaderVouchedUntil); 0 says nothing (no bound), also over a
// value ctx held.
func WithVouchedUntil(ctx context.Context, until time.Duration) context.Context {
	return context.WithValue(ctx, vouchedUntilKey{}, until)
}

// SetNodeCheck tells the launcher where to ask for its kubelet's lease (launcherv1.PathNodeCheck).
func (c *Client) SetNodeCheck(ctx context.Context, nc launcherv1.NodeCheck) error {
	return c.do(ctx, http.MethodPut, launcherv1.PathNodeCheck, nc, nil, DefaultTimeout)
}

// PrivateDir is the launcher's private directory as seen from here.
func (c *Client) PrivateDir() string { return c.dir }

// MigrationSocket connects to the migration socket name (one of launcherv1's Migration*Socket) in
// the launcher's launcherv1.MigrationDir.
func (c *Client) MigrationSocket(ctx context.Context, name string) (net.Conn, error) {
	return DialSocket(ctx, c.dir, filepath.Join(launcherv1.MigrationDir, name))
}

// Shutdown asks for an ACPI power-off; the launcher kills the guest after gracePeriodSeconds (at once
// for 0).
func (c *Client) Shutdown(ctx context.Context, gracePeriodSeconds int64) error {
	req := launcherv1.ShutdownRequest{GracePeriodSeconds: gracePeriodSeconds}
	return c.do(ctx, http.MethodPost, launcherv1.PathShutdown, req, nil, DefaultTimeout)
}

// Kill stops the guest at once.
func (c *Client) Kill(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, launcherv1.PathKill, nil, nil, DefaultTimeout)
}

// Pause pauses the guest.
func (c *Client) Pause(ctx context.Context) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodPost, launcherv1.PathPause, nil, DefaultTimeout)
}

// Unpause resumes a paused guest.
func (c *Client) Unpause(ctx context.Context) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodPost, launcherv1.PathUnpause, nil, DefaultTimeout)
}

// Status reports the guest's state.
func (c *Client) Status(ctx context.Context) (launcherv1.Status, error) {
	return c.status(ctx, http.MethodGet, launcherv1.PathStatus, nil, DefaultTimeout)
}

// status sends one request whose reply is the guest's status, bounded (launcherv1.Status.Bounded):
// the launcher is the tenant's, and the agent passes what it says on to the API.
func (c *Client) status(ctx context.Context, method, path string, in any, timeout time.Duration) (launcherv1.Status, error) {
	var st launcherv1.Status
	err := c.do(ctx, method, path, in, &st, timeout)
	return st.Bounded(), err
}

// do sends one request; in (if not nil) is the JSON body, out (if not nil) receives the JSON reply.
func (c *Client) do(ctx context.Context, method, path string, in, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s request: %w", path, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, body)
	if err != nil {
		return fmt.Errorf("build %s request: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if until, ok := ctx.Value(vouchedUntilKey{}).(time.Duration); ok && until > 0 {
		req.Header.Set(launcherv1.HeaderVouchedUntil, strconv.FormatInt(int64(until), 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("launcher %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("read launcher %s reply: %w", path, err)
	}
	if len(raw) > MaxReplyBytes {
		return fmt.Errorf("launcher %s reply: longer than %d bytes", path, MaxReplyBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return replyError(path, resp.StatusCode, raw)
	}
	if out == nil || len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode launcher %s reply: %w", path, err)
	}
	return nil
}

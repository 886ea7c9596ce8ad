//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// What the demo guest prints (docs/guest-images.md).
const (
	bannerPrefix   = "Podvirt demo guest "
	bannerSuffix   = " booted"
	userDataLine   = "printed from cloud-init userdata"
	userDataExited = "Podvirt demo guest: user-data exited with status"
)

// consoleContainer is the launcher Pod's container that copies the guest's serial log to stdout.
const consoleContainer = "guest-console-log"

// consoleTimes is when the guest's console lines came out. Logged is the container runtime's own
// timestamp of the log entry (when the guest-console-log container wrote it, which follows the
// serial log every 250 ms); arrived is when the followed log stream delivered it here.
type consoleTimes struct {
	firstLogged, firstArrived   time.Time
	bannerLogged, bannerArrived time.Time
	userData                    bool
}

// followConsole follows the guest-console-log container of pod (retrying while the container has
// not started) until the demo guest reports its user data done, and returns when each milestone
// came out. It fails when the stream ends first, or when ctx ends.
func followConsole(ctx context.Context, cs kubernetes.Interface, ns, pod string) (consoleTimes, error) {
	var rc io.ReadCloser
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		req := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: consoleContainer, Follow: true, Timestamps: true})
		s, err := req.Stream(ctx)
		if err != nil {
			return false, nil // the container is still waiting to start
		}
		rc = s
		return true, nil
	})
	if err != nil {
		return consoleTimes{}, fmt.Errorf("open log stream of %s/%s: %w", pod, consoleContainer, err)
	}
	defer rc.Close()
	return readConsole(bufio.NewReader(rc))
}

// readConsole reads timestamped log lines ("2026-11-22T03:58:31.123456789Z text") until the user
// data's exit line.
func readConsole(r *bufio.Reader) (consoleTimes, error) {
	var ct consoleTimes
	var text strings.Builder
	for {
		line, err := r.ReadString('\n')
		now := time.Now()
		if line != "" {
			logged, rest := splitTimestamp(line)
			if ct.firstArrived.IsZero() {
				ct.firstLogged, ct.firstArrived = logged, now
			}
			if ct.bannerArrived.IsZero() && strings.Contains(rest, bannerPrefix) && strings.Contains(rest, bannerSuffix) {
				ct.bannerLogged, ct.bannerArrived = logged, now
			}
			ct.userData = ct.userData || strings.Contains(rest, userDataLine)
			text.WriteString(rest)
			if strings.Contains(rest, userDataExited) {
				if ct.bannerArrived.IsZero() || !ct.userData {
					return ct, fmt.Errorf("user data done without banner or user-data output; console:\n%s", text.String())
				}
				return ct, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ct, fmt.Errorf("console log ended before the user data finished; console:\n%s", text.String())
			}
			return ct, fmt.Errorf("read console log: %w", err)
		}
	}
}

// splitTimestamp splits a line of a log stream read with timestamps; a line without one (the rest of
// a partial entry) gets the zero time.
func splitTimestamp(line string) (time.Time, string) {
	ts, rest, ok := strings.Cut(line, " ")
	if !ok {
		return time.Time{}, line
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, line
	}
	return at, rest
}

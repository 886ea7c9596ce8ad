// Command probe is the e2e tests' in-pod helper, one static binary with modes:
//
//	probe sleep                          run until SIGTERM/SIGINT
//	probe serve --port P --text T        answer every HTTP request with T
//	probe fetch --url U [--timeout D]    GET U until it answers 200 (retrying), print the body
//	probe list-pods                      list the pods of its namespace through the in-cluster config
//	probe write --file F --text T        write T to F
//	probe read --file F                  print F
//	probe cat                            copy stdin to stdout, unbuffered (the console benchmark's exec baseline)
//	probe status --url U [--method M] [--body B]
//	                                     one request with no credentials (any server certificate):
//	                                     print "status N", or "error: …" when there is no answer
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: probe sleep|serve|fetch|list-pods|write|read|cat|status [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	port := fs.Int("port", 8080, "serve: port")
	text := fs.String("text", "", "serve/write: text")
	url := fs.String("url", "", "fetch: URL")
	timeout := fs.Duration("timeout", time.Minute, "fetch: give up after")
	file := fs.String("file", "", "write/read: file")
	method := fs.String("method", http.MethodGet, "status: method")
	body := fs.String("body", "", "status: body (JSON)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "sleep":
		fmt.Fprintln(out, "probe: sleeping")
		<-ctx.Done()
		return nil
	case "serve":
		return serve(ctx, *port, *text, out)
	case "fetch":
		return fetch(ctx, *url, *timeout, out)
	case "list-pods":
		return listPods(ctx, out)
	case "write":
		if *file == "" {
			return errors.New("write: --file is required")
		}
		return os.WriteFile(*file, []byte(*text), 0o644)
	case "read":
		data, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", data)
		return err
	case "cat":
		_, err := io.Copy(out, os.Stdin)
		return err
	case "status":
		return status(ctx, *method, *url, *body, out)
	default:
		return fmt.Errorf("unknown mode %q", args[0])
	}
}

func serve(ctx context.Context, port int, text string, out io.Writer) error {
	srv := &http.Server{Addr: fmt.Sprintf(":%d", port), ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, text) })}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(out, "probe: serving on :%d\n", port)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdownCtx)
		<-errc
		return err
	}
}

func fetch(ctx context.Context, url string, timeout time.Duration, out io.Writer) error {
	if url == "" {
		return errors.New("fetch: --url is required")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		body, err := get(ctx, client, url)
		if err == nil {
			fmt.Fprintln(out, body)
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("fetch %s: %w (last: %v)", url, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return string(body), nil
}

func listPods(ctx context.Context, out io.Writer) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("in-cluster config: %w", err)
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return fmt.Errorf("own namespace: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(strings.TrimSpace(string(ns))).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods via %s: %w", cfg.Host, err)
	}
	fmt.Fprintf(out, "apiserver %s: %d pods\n", cfg.Host, len(pods.Items))
	for _, p := range pods.Items {
		fmt.Fprintf(out, "pod %s\n", p.Name)
	}
	return nil
}

// status makes one request as anything on the Pod network would: no token, no client certificate,
// any server certificate accepted.
func status(ctx context.Context, method, url, body string, out io.Writer) error {
	if url == "" {
		return errors.New("status: --url is required")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // plays anything on the network
	resp, err := client.Do(req)
	if err != nil {
		_, err = fmt.Fprintf(out, "error: %v\n", err)
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_, err = fmt.Fprintf(out, "status %d\n", resp.StatusCode)
	return err
}

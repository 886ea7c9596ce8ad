package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// serveWebhooks runs a webhook server where envtest pointed the installed webhook configurations,
// with register's webhooks, until the returned stop is called; it returns once the server answers.
func serveWebhooks(te *envtest.Environment, c client.Client, register func(webhook.Server, *k8sruntime.Scheme, client.Client)) (stop func(), err error) {
	opts := te.WebhookInstallOptions
	srv := webhook.NewServer(webhook.Options{Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir})
	register(srv, te.Scheme, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop = func() {
		cancel()
		<-done
	}
	check := srv.StartedChecker()
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, errors.Join(errors.New("webhook server ended"), err)
		default:
		}
		return check(req) == nil, nil
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("start webhook server: %w", err)
	}
	return stop, nil
}

package localcluster

import "fmt"

// The kube-apiserver presents a client certificate (WebhookClientCN, of the cluster CA) to every
// admission webhook, so virt-api can tell it from any Pod that reaches the webhook port.

func (c Config) admissionConfig() string   { return c.path("admission", "admission-config.yaml") }
func (c Config) webhookKubeconfig() string { return c.path("admission", "webhook-client.kubeconfig") }

// admissionConfigFile configures both webhook admission plugins with webhookKubeconfig.
func (c Config) admissionConfigFile() string {
	plugin := func(name string) string {
		return fmt.Sprintf(`- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %s
`, name, c.webhookKubeconfig())
	}
	return "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n" +
		plugin("ValidatingAdmissionWebhook") + plugin("MutatingAdmissionWebhook")
}

// webhookKubeconfigFile gives the apiserver the webhook client certificate for every webhook
// ('*': the kubeconfig's users are matched against a webhook's host name).
func (c Config) webhookKubeconfigFile() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: '*'
  user:
    client-certificate: %s
    client-key: %s
`, c.pki("webhook-client.crt"), c.pki("webhook-client.key"))
}

// Package cli is virtctl, the command line of Podvirt (also installed as the kubectl plugin
// `kubectl virt`): each command is an Options value with Complete (flags and kubeconfig into
// clients), Validate (pure checks of the flags, before any request) and Run, writing only to its
// IOStreams. It talks only to the Kubernetes API and subresources.kubevirt.io, so it works against
// any cluster that serves KubeVirt's API.
package cli

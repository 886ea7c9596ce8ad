// Package apiserver is virt-api's role: the aggregated API server of subresources.kubevirt.io.
//
// NewServer builds it on k8s.io/apiserver: secure serving with a certificate that cert-controller
// rotates (CertFiles mirrors it from its Secret), authentication delegated to the kube-apiserver
// (front-proxy request headers), every request authorized by a SubjectAccessReview, the group's
// discovery, and console/vnc/portforward declared long-running. Handlers serve the calls: start,
// stop and restart on VirtualMachines (their decisions are package lifecycle's) with KubeVirt's
// wire behaviour. Package admission holds its webhooks. Streaming, pause/unpause and migrate are
// still to come.
package apiserver

// Package apiserver is virt-api's role: the aggregated API server of subresources.kubevirt.io (start,
// stop, restart, pause, console … on VirtualMachines and their instances). Its first part is package
// lifecycle, the pure decisions of the start, stop and restart calls; the server itself (delegated
// authentication and authorization, streaming, admission, certificates) is still to come.
package apiserver

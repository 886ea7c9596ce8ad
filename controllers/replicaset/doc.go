// Package replicaset is the VirtualMachineInstanceReplicaSet controller: it keeps spec.replicas
// instances matching the selector, claiming (adopting and releasing) instances like Kubernetes
// ReplicaSets do, creating and deleting in bounded bursts, and reporting replicas and readyReplicas
// for `kubectl get vmirs` and the scale subresource.
package replicaset

#!/usr/bin/env bash
# The main job on the local cluster (called by `make demo` after the cluster is up, images are
# imported and Podvirt is deployed): start KubeVirt's own vm-cirros example, unchanged, the way the
# seed does (kubectl patch … running:true), wait for its instance to run and show its serial console.
set -euo pipefail
: "${KUBECTL:?}" "${KUBECONFIG:?}"
k() { "$KUBECTL" "$@" 2> >(grep -v 'WARNING: version difference\|deprecated; use kubevirt.io/v1' >&2); }

k -n podvirt rollout status deployment/virt-controller --timeout=3m
k -n podvirt rollout status daemonset/virt-handler --timeout=3m
k -n podvirt rollout status deployment/virt-api --timeout=3m

k apply -f examples/vm-cirros.yaml
k patch virtualmachine vm-cirros --type merge -p '{"spec":{"running":true}}'
echo "demo: waiting for vm-cirros to run (software emulation on this machine)"
k wait vmi/vm-cirros --for=jsonpath='{.status.phase}'=Running --timeout=5m
k get vm,vmi vm-cirros

pod=$(k get vmi vm-cirros -o jsonpath='{.status.launcherPod}')
userdata=no
for _ in $(seq 120); do
  if k logs "$pod" -c guest-console-log | grep -q 'printed from cloud-init userdata'; then userdata=yes; break; fi
  sleep 1
done
echo
echo "demo: the guest's serial console (kubectl logs $pod -c guest-console-log):"
echo "----------------------------------------------------------------------"
k logs "$pod" -c guest-console-log | grep -v '^\[ *[0-9.]*\] ' || true
echo "----------------------------------------------------------------------"
if [ "$userdata" != yes ]; then
  echo "demo: FAILED: vm-cirros runs, but its guest did not print its cloud-init user data" \
    "('printed from cloud-init userdata') on the serial console within 120 s." >&2
  echo "demo: look at the console above, 'kubectl describe vmi vm-cirros' and 'make cluster-logs'." >&2
  exit 1
fi
cat <<MSG
demo: vm-cirros runs. Try:
  export KUBECONFIG=$KUBECONFIG
  kubectl get vm,vmi                      # STATUS, PHASE, IP
  kubectl describe vm vm-cirros           # conditions and events
  kubectl patch vm vm-cirros --type merge -p '{"spec":{"running":false}}'   # stop it
  make cluster-down                       # remove the local cluster
MSG

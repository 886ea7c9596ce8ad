#!/usr/bin/env bash
# The main job on the local cluster (called by `make demo` after the cluster is up, images are
# imported and Podvirt is deployed): start KubeVirt's own vm-cirros example, unchanged, with
# `virtctl start --wait`, show its serial console log, then run a command in its console with virtctl.
set -euo pipefail
: "${KUBECTL:?}" "${KUBECONFIG:?}" "${VIRTCTL:?}"
k() { "$KUBECTL" "$@" 2> >(grep -v 'WARNING: version difference\|deprecated; use kubevirt.io/v1' >&2); }

k -n podvirt rollout status deployment/virt-controller --timeout=3m
k -n podvirt rollout status daemonset/virt-handler --timeout=3m
k -n podvirt rollout status deployment/virt-api --timeout=3m

k apply -f examples/vm-cirros.yaml
echo "demo: \$ virtctl start vm-cirros --wait   (software emulation on this machine)"
"$VIRTCTL" start vm-cirros --wait
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
echo
echo "demo: \$ echo 'uname -a' | virtctl console vm-cirros --expect 'Linux .*\n'"
printf '\nuname -a\n' | "$VIRTCTL" console vm-cirros --expect 'Linux .*\n' --timeout 2
echo
cat <<MSG
demo: vm-cirros runs. Try:
  export KUBECONFIG=$KUBECONFIG PATH=$(dirname "$VIRTCTL"):\$PATH
  virtctl console vm-cirros               # interactive; leave with Ctrl+]
  kubectl get vm,vmi                      # STATUS, PHASE, IP
  virtctl stop vm-cirros --wait           # stop it
  make cluster-down                       # remove the local cluster
MSG

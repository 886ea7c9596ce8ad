# Fedora's prompt, which KubeVirt's tests wait for: [user@host dir]$
[ -z "$PS1" ] && return
PS1='[\u@\h \W]\$ '

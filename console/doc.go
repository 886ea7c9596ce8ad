// Package console is the websocket streaming shared by the node agent, virt-api and the CLI, in
// KubeVirt's wire form: subprotocol plain.kubevirt.io, binary frames carrying raw bytes. It adds
// what KubeVirt's lacks: the server pings idle sessions so proxies keep them open, a session ends
// with a close frame whose reason a client can print, buffers are bounded (a slow viewer is
// dropped, never buffered without limit), and several viewers can share one serial console (Hub).
package console

//go:build ignore

// Command coredns is CoreDNS with only the plugins the local cluster's Corefile uses
// (internal/localcluster/dns.go): CoreDNS's documented way to build a smaller server is a main
// package importing coremain and the chosen plugins. The whole server pulls in every cloud
// provider's SDK (137 s cold here, downloads included); this one 84 s. Built by `make coredns`
// (mk/cluster.mk) in a module of its own, without this build line, never as part of Podvirt's.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The Corefile's plugins; a plugin the Corefile names and this does not import fails `up`.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func main() {
	coremain.Run()
}

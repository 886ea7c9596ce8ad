package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckNamesTheChain(t *testing.T) {
	m := func(p string) string { return module + p }
	graph := map[string][]string{
		m("cli"):                     {"fmt", m("internal/scheme"), m("console")},
		m("internal/scheme"):         {m("nodeagent/heartbeat")},
		m("nodeagent/heartbeat"):     nil,
		m("console"):                 {"net/http"},
		m("api/v1"):                  {"k8s.io/apimachinery/pkg/runtime", "sigs.k8s.io/controller-runtime/pkg/client", m("api/launcher/v1")},
		m("api/launcher/v1"):         {"time"},
		m("controllers/vm"):          {m("controllers/podtemplate")},
		m("controllers/migration"):   {m("controllers/vmi")},
		m("controllers/vmi"):         {m("controllers/podtemplate")},
		m("controllers/podtemplate"): {m("api/v1")},
	}
	got := check(graph, rules())
	assert.ElementsMatch(t, []string{
		m("api/v1") + " imports sigs.k8s.io/controller-runtime/pkg/client: api/ imports only k8s.io/apimachinery, k8s.io/api and api/",
		m("cli") + " reaches nodeagent/heartbeat (the CLI talks to the API only): cli → internal/scheme → nodeagent/heartbeat",
		m("controllers/migration") + " reaches controllers/vmi (controllers import no sibling controller): controllers/migration → controllers/vmi",
	}, got)
}

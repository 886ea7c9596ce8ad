// Package v1 (imported as agentv1) is the contract between virt-api and the node agents, and between
// two node agents during a migration: the HTTPS paths an agent serves on its node's address, the port,
// the names of the certificates that authenticate both ends, and the Events a migration leaves on an
// instance. virt-api, the controllers and the CLI import it instead of the agent itself.
//
// It is pure Go (the standard library, k8s.io/api and api/ only). Every path is under /v1/; a breaking change gets a new prefix.
package v1

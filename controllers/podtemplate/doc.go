// Package podtemplate renders an instance's launcher Pod (containers, volumes, resources, names; what
// KubeVirt's template service does) for the controllers that create one: the VMI controller for an
// instance's start and the migration controller for a migration's target. It is pure: no client.
package podtemplate

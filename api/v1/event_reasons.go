package v1

// Reasons of the Events the controllers record for the objects they create and delete for another
// (KubeVirt's, which clients and dashboards filter on).
const (
	// ReasonSuccessfulCreate: an object was created for this one (a launcher Pod, an instance, a claim).
	ReasonSuccessfulCreate = "SuccessfulCreate"
	// ReasonFailedCreate: creating it failed; the message says why, and it is retried.
	ReasonFailedCreate = "FailedCreate"
	// ReasonSuccessfulDelete: an object was deleted for this one.
	ReasonSuccessfulDelete = "SuccessfulDelete"
)

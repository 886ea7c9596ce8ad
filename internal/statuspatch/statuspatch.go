// Package statuspatch is the one way Podvirt's reconcilers (the controllers and the node agent) write
// an object's status, and the one conflict policy they share.
//
// A pass computes the status from what it observed, then writes it once with a JSON merge patch
// under an optimistic lock (the resourceVersion it read): the VMI controller and the node agent
// write the same objects, and a VM's state-change requests are appended by others, so nothing may
// be overwritten blindly. When the lock loses (409 Conflict) the pass's view was stale; it is not
// retried on the spot (that would write a status computed from stale data) but the whole pass runs
// again shortly on fresh data, without an error log: conflicts are normal, not failures.
package statuspatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConflictRetry is how soon a pass whose status write lost the optimistic lock runs again.
const ConflictRetry = 100 * time.Millisecond

// Write patches obj's status subresource with the difference from orig, under orig's
// resourceVersion. It writes nothing when the status did not change. It reports whether it wrote;
// an object that is gone is not an error. Every other error, a Conflict included, is returned
// wrapped (what names the object in the message).
func Write(ctx context.Context, c client.Client, orig, obj client.Object, what string) (bool, error) {
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	data, err := patch.Data(obj)
	if err != nil {
		return false, fmt.Errorf("compute %s status patch: %w", what, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return false, fmt.Errorf("compute %s status patch: %w", what, err)
	}
	if _, changed := fields["status"]; !changed {
		return false, nil
	}
	err = c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("write %s status: %w", what, err)
	}
	return true, nil
}

// Result folds a pass's deferred status write into Reconcile's return values: the pass's own error
// first (with the write's, unless that was a conflict), then a conflict as a quick requeue without
// error, then the write's error, else the pass's result.
func Result(res ctrl.Result, passErr, writeErr error) (ctrl.Result, error) {
	conflict := apierrors.IsConflict(writeErr)
	switch {
	case passErr != nil && writeErr != nil && !conflict:
		return ctrl.Result{}, errors.Join(passErr, writeErr)
	case passErr != nil:
		return ctrl.Result{}, passErr
	case conflict:
		return ctrl.Result{RequeueAfter: ConflictRetry}, nil
	case writeErr != nil:
		return ctrl.Result{}, writeErr
	}
	return res, nil
}

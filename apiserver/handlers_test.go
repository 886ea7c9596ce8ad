package apiserver

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestIsTestFailed(t *testing.T) {
	// What the kube-apiserver answers when a JSON patch's test op fails (observed, and checked by
	// controllers' TestStaleSubresourceCallChangesNothing).
	testFailed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid, Message: "the server rejected our request due to an error in our request", Details: &metav1.StatusDetails{}}}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, "vm",
		field.ErrorList{field.Invalid(field.NewPath("spec", "runStrategy"), "x", "unsupported")})
	assert.True(t, isTestFailed(testFailed))
	assert.False(t, isTestFailed(invalid), "a validation failure names its object and field: not a race")
	assert.False(t, isTestFailed(errors.New("connection refused")))
	assert.False(t, isTestFailed(nil))
}

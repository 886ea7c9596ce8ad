package v1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	subv1 "github.com/podvirt/podvirt/api/subresources/v1"
)

// Every bound of an exec request is checked, naming the field.
func TestExecRequestValidate(t *testing.T) {
	many := make([]string, subv1.MaxExecArgs+1)
	for i := range many {
		many[i] = "a"
	}
	for name, tc := range map[string]struct {
		req  subv1.ExecRequest
		want string
	}{
		"a command":            {subv1.ExecRequest{Command: []string{"uname", "-a"}, TimeoutSeconds: 60}, ""},
		"no command":           {subv1.ExecRequest{}, "command: a program to run is required"},
		"an empty program":     {subv1.ExecRequest{Command: []string{""}}, "command: a program to run is required"},
		"too many arguments":   {subv1.ExecRequest{Command: many}, "command: at most 256 arguments, got 257"},
		"too long":             {subv1.ExecRequest{Command: []string{"echo", strings.Repeat("x", subv1.MaxExecArgBytes)}}, "command: at most 16384 bytes in all, got 16388"},
		"a NUL":                {subv1.ExecRequest{Command: []string{"echo", "a\x00b"}}, "command[1]: contains a NUL byte"},
		"not UTF-8":            {subv1.ExecRequest{Command: []string{"cat", "\xff"}}, "command[1]: is not valid UTF-8"},
		"too much stdin":       {subv1.ExecRequest{Command: []string{"cat"}, Stdin: make([]byte, subv1.MaxExecInputBytes+1)}, "stdin: at most 32768 bytes, got 32769"},
		"a negative timeout":   {subv1.ExecRequest{Command: []string{"true"}, TimeoutSeconds: -1}, "timeoutSeconds: must be between 0 and 3600, got -1"},
		"a timeout past limit": {subv1.ExecRequest{Command: []string{"true"}, TimeoutSeconds: 3601}, "timeoutSeconds: must be between 0 and 3600, got 3601"},
	} {
		err := tc.req.Validate()
		if tc.want == "" {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorContains(t, err, tc.want, name)
		}
	}
}

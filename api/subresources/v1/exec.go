package v1

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Validate checks an exec request against the contract's bounds; the error names the field.
func (r *ExecRequest) Validate() error {
	switch {
	case len(r.Command) == 0 || r.Command[0] == "":
		return fmt.Errorf("command: a program to run is required")
	case len(r.Command) > MaxExecArgs:
		return fmt.Errorf("command: at most %d arguments, got %d", MaxExecArgs, len(r.Command))
	case len(r.Stdin) > MaxExecInputBytes:
		return fmt.Errorf("stdin: at most %d bytes, got %d", MaxExecInputBytes, len(r.Stdin))
	case r.TimeoutSeconds < 0 || r.TimeoutSeconds > MaxExecTimeoutSeconds:
		return fmt.Errorf("timeoutSeconds: must be between 0 and %d, got %d", MaxExecTimeoutSeconds, r.TimeoutSeconds)
	}
	total := 0
	for i, a := range r.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("command[%d]: contains a NUL byte", i)
		}
		if !utf8.ValidString(a) {
			return fmt.Errorf("command[%d]: is not valid UTF-8 (the guest agent takes JSON strings)", i)
		}
		total += len(a)
	}
	if total > MaxExecArgBytes {
		return fmt.Errorf("command: at most %d bytes in all, got %d", MaxExecArgBytes, total)
	}
	return nil
}

package metricsauth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTokenShaped(t *testing.T) {
	for header, want := range map[string]bool{
		"Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl": true,
		"":                      false,
		"Basic dXNlcjpwYXNz":    false,
		"Bearer random-garbage": false,
		"Bearer a.b":            false,
		"Bearer a..c":           false,
		"Bearer a.b.c d":        false,
		"Bearer " + strings.Repeat("a", 20000) + ".b.c": false,
	} {
		assert.Equal(t, want, tokenShaped(header), "%.40q", header)
	}
}

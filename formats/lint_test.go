package formats

import "testing"

func lintFile(t *testing.T, path string) {}

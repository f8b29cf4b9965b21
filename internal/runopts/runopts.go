// Package runopts fills in the options that every kind of run (export,
// dedupe, reconcile) has, when its caller leaves them unset: one rule for
// all of them.
package runopts

import (
	"log/slog"
	"os"
)

// Defaults sets what the caller left unset: spill files go under
// os.TempDir(), logs are discarded and failpoints do nothing. A nil
// pointer is an option that kind of run does not have.
func Defaults(tempDir *string, logger **slog.Logger, failpoint *func(name string)) {
	if tempDir != nil && *tempDir == "" {
		*tempDir = os.TempDir()
	}
	if logger != nil && *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	if failpoint != nil && *failpoint == nil {
		*failpoint = func(string) {}
	}
}

// Positive sets *v to def unless it is positive: sizes and counts where 0
// (or less) means the default.
func Positive[T ~int | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

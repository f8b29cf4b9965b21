package objstore

import (
	"fmt"
	"strings"
)

// ValidateKey refuses keys that could escape a prefix or that stores treat
// differently: empty keys, absolute keys, and "." or ".." segments.
func ValidateKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") {
		return fmt.Errorf("invalid object key %q: %w", key, ErrPermanent)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid object key %q: %w", key, ErrPermanent)
		}
	}
	return nil
}

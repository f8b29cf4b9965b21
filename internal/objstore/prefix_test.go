package objstore_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
)

// The prefixed view that a destination URL's path creates must itself be a
// conforming bucket.
func TestPrefixConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithPrefix(mem.New(), "lake/tenant-a")
	})
}

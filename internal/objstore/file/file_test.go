package file_test

import (
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/file"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

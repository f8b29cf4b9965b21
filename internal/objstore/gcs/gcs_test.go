package gcs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/gcs"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
)

func newBucket(t *testing.T) *gcs.Bucket {
	// A smaller chunk than the default makes the 64 MiB stream a
	// multi-chunk resumable upload.
	b, err := gcs.New(t.Context(), cloudtest.GCSBucket(t), gcs.Options{ChunkSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) { objstoretest.RunCloud(t, newBucket) }

func TestMissingBucket(t *testing.T) {
	cloudtest.GCSEmulator(t)
	b, err := gcs.New(t.Context(), "hw-no-such-bucket", gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Check(t.Context(), "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `"hw-no-such-bucket" does not exist`) {
		t.Fatalf("missing bucket: %v", err)
	}
}

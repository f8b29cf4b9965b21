package gcs_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/gcs"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
	"github.com/highwater-dev/highwater/internal/objstore/retry"
)

// emulator points the SDK at the fake-gcs-server that scripts/servers.sh
// started, for this test only.
func emulator(t *testing.T) {
	host := os.Getenv("HIGHWATER_TEST_GCS_ENDPOINT")
	if host == "" {
		t.Skip("HIGHWATER_TEST_GCS_ENDPOINT is not set: run scripts/servers.sh start and source its env file")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", host)
}

func newBucket(t *testing.T) *gcs.Bucket {
	// A smaller chunk than the default makes the 64 MiB stream a
	// multi-chunk resumable upload.
	b, err := gcs.New(t.Context(), cloudtest.GCSBucket(t), gcs.Options{ChunkSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return newBucket(t) })
}

func TestConformanceRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return retry.New(newBucket(t), retry.Policy{}) })
}

func TestMissingBucket(t *testing.T) {
	emulator(t)
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

// Package cloudtest gives tests a fresh bucket on the object-store servers
// that scripts/servers.sh starts (versitygw, fake-gcs-server, Azurite), as a
// destination URL. Each function skips the test when its server's variable
// is not set, and points the provider's SDK at the server with t.Setenv, so
// the code under test finds it the way it would find a real cloud.
package cloudtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/azure"
	"github.com/highwater-dev/highwater/internal/objstore/gcs"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
)

// Names of the variables that scripts/servers.sh writes.
const (
	EnvS3    = "HIGHWATER_TEST_S3_ENDPOINT"
	EnvGCS   = "HIGHWATER_TEST_GCS_ENDPOINT"
	EnvAzure = "HIGHWATER_TEST_AZURE_CONNECTION_STRING"
)

// Name returns a bucket name that no other test uses.
func Name() string {
	var b [6]byte
	rand.Read(b[:])
	return "hw-test-" + hex.EncodeToString(b[:])
}

func need(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s is not set: run scripts/servers.sh start and source its env file (make test does)", env)
	}
	return v
}

// S3Endpoint points the AWS SDK at the test S3 server for this test and
// returns the server's URL.
func S3Endpoint(t testing.TB) string {
	t.Helper()
	ep := need(t, EnvS3)
	t.Setenv("AWS_ENDPOINT_URL_S3", ep)
	return ep
}

// GCSEmulator points the GCS SDK at the test server for this test.
func GCSEmulator(t testing.TB) {
	t.Helper()
	t.Setenv("STORAGE_EMULATOR_HOST", need(t, EnvGCS))
}

// AzureConnectionString points the Azure SDK at Azurite for this test and
// returns the connection string.
func AzureConnectionString(t testing.TB) string {
	t.Helper()
	cs := need(t, EnvAzure)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", cs)
	return cs
}

// S3 creates a bucket on the test S3 server and returns s3://bucket.
func S3(t testing.TB) string { return "s3://" + S3Bucket(t) }

// S3Bucket creates a bucket on the test S3 server and returns its name.
func S3Bucket(t testing.TB) string {
	t.Helper()
	S3Endpoint(t)
	name := Name()
	b, err := s3.New(t.Context(), name, s3.Options{})
	if err != nil {
		t.Fatalf("s3 client: %v", err)
	}
	if _, err := b.Client().CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		empty(ctx, b)
		b.Client().DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

// GCS creates a bucket on the test GCS server and returns gs://bucket.
func GCS(t testing.TB) string { return "gs://" + GCSBucket(t) }

// GCSBucket creates a bucket on the test GCS server and returns its name.
func GCSBucket(t testing.TB) string {
	t.Helper()
	GCSEmulator(t)
	name := Name()
	b, err := gcs.New(t.Context(), name, gcs.Options{})
	if err != nil {
		t.Fatalf("gcs client: %v", err)
	}
	if err := b.Client().Bucket(name).Create(t.Context(), "highwater-test", nil); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		empty(ctx, b)
		b.Client().Bucket(name).Delete(ctx)
	})
	return name
}

// Azure creates a container on Azurite and returns azblob://container.
func Azure(t testing.TB) string { return "azblob://" + AzureContainer(t) }

// AzureContainer creates a container on Azurite and returns its name.
func AzureContainer(t testing.TB) string {
	t.Helper()
	cs := AzureConnectionString(t)
	name := Name()
	b, err := azure.New(t.Context(), name, azure.Options{ConnectionString: cs})
	if err != nil {
		t.Fatalf("azure client: %v", err)
	}
	if _, err := b.Container().Create(t.Context(), nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() { b.Container().Delete(context.Background(), nil) })
	return name
}

func empty(ctx context.Context, b objstore.Bucket) {
	b.List(ctx, "", func(a objstore.Attrs) error { return b.Delete(ctx, a.Key) })
}

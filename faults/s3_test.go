package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
)

// createBucket makes a bucket on the S3 test server at ep, and empties
// and removes it when the test ends.
func createBucket(t *testing.T, ep, name string) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_S3", ep)
	b, err := s3.New(t.Context(), name, s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := b.Client()
	if _, err := c.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var keys []string
		_ = b.List(ctx, "", func(a objstore.Attrs) error { keys = append(keys, a.Key); return nil })
		for _, k := range keys {
			_ = b.Delete(ctx, k)
		}
		c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(name)})
		b.Close()
	})
}

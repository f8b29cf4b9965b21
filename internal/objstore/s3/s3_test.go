package s3_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
)

// newBucket creates a fresh bucket on the test server and removes it after.
func newBucket(t *testing.T) *s3.Bucket {
	b, err := s3.New(t.Context(), cloudtest.S3Bucket(t), s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) { objstoretest.RunCloud(t, newBucket) }

// A cancelled multipart upload must not leave parts behind.
func TestCancelAbortsMultipart(t *testing.T) {
	b := newBucket(t)
	ctx, cancel := context.WithCancel(t.Context())
	r := &slowReader{left: 40 << 20, cancelAt: 20 << 20, cancel: cancel}
	if err := b.Put(ctx, "k", r, objstore.PutOptions{}); err == nil {
		t.Fatal("cancelled put succeeded")
	}
	out, err := b.Client().ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(b.Name())})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	if len(out.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left behind", len(out.Uploads))
	}
}

type slowReader struct {
	left, cancelAt int64
	cancel         context.CancelFunc
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errors.New("unexpected end")
	}
	n := min(int64(len(p)), r.left)
	clear(p[:n])
	r.left -= n
	r.cancelAt -= n
	if r.cancelAt <= 0 && r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	return int(n), nil
}

func TestErrors(t *testing.T) {
	ep := cloudtest.S3Endpoint(t)
	ctx := t.Context()
	b, err := s3.New(ctx, "hw-no-such-bucket", s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(ctx, "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `"hw-no-such-bucket" does not exist`) {
		t.Errorf("missing bucket: %v", err)
	}
	good := newBucket(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
	bad, err := s3.New(ctx, good.Name(), s3.Options{Endpoint: ep})
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Check(ctx, "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Errorf("wrong secret: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("the secret leaked into the error: %v", err)
	}
	if _, err := s3.New(ctx, "x", s3.Options{SSE: "rot13"}); !errors.Is(err, objstore.ErrPermanent) {
		t.Errorf("unknown SSE: %v", err)
	}
}

// The store must have received, and verified, a CRC32C of the content.
func TestChecksumSent(t *testing.T) {
	b := newBucket(t)
	if err := b.Put(t.Context(), "c", strings.NewReader("checksummed"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := b.Client().HeadObject(t.Context(), &awss3.HeadObjectInput{
		Bucket: aws.String(b.Name()), Key: aws.String("c"), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.ChecksumCRC32C == nil {
		t.Fatalf("no CRC32C stored with the object")
	}
}

package destination_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/destination"
	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/azure"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/gcs"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
	"github.com/highwater-dev/highwater/internal/redact"
)

func randomName() string {
	var buf [6]byte
	rand.Read(buf[:])
	return "hw-dest-" + hex.EncodeToString(buf[:])
}

func TestBadURLs(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct{ raw, want string }{
		{"ftp://host/lake", `unknown scheme "ftp"`},
		{"s3://bucket/lake/%zz", "parse destination URL"},
		{"s3://bucket/lake/../other", `".." segments`},
		{"gs://bucket/./lake", `"." segments`},
		{"az://container/a/../../b", `".." segments`},
		{"file:///tmp/../etc", `".." segments`},
		{"s3:///lake", "names no bucket"},
		{"/just/a/path", "has no scheme"},
		{"s3://bucket/{tenant}/lake", "no tenant is set"},
		{"s3://{tenant}/lake", "in host name"},
		{"s3://bucket/lake?prefix={tenant}", "belongs in the path"},
	} {
		_, err := destination.Open(ctx, c.raw, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("open %q: want an error containing %q, got %v", c.raw, c.want, err)
		}
	}
}

func TestSecretsNotPrinted(t *testing.T) {
	raw := "s3://bucket/lake?endpoint=http://127.0.0.1:1&secret_access_key=hunter2&kms_key_id=k"
	if got := redact.URL(raw); strings.Contains(got, "hunter2") {
		t.Fatalf("redact %q = %q", raw, got)
	}
}

func createS3Bucket(t *testing.T) string { return cloudtest.S3Bucket(t) }

// roundTrip writes through the destination and checks that the object lands
// under the URL's prefix and that its URL names it.
func roundTrip(t *testing.T, raw string, under objstore.Bucket, prefix string) {
	t.Helper()
	ctx := t.Context()
	d, err := destination.Open(ctx, raw, "acme corp")
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	defer d.Close()
	if err := d.Put(ctx, "orders/_manifests/1.json", strings.NewReader("{}"), objstore.PutOptions{IfNotExist: true}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := d.Put(ctx, "orders/_manifests/1.json", strings.NewReader("{}"), objstore.PutOptions{IfNotExist: true}); !errors.Is(err, objstore.ErrExist) {
		t.Fatalf("second create: want ErrExist, got %v", err)
	}
	var keys []string
	if err := under.List(ctx, "", func(a objstore.Attrs) error { keys = append(keys, a.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{prefix + "/orders/_manifests/1.json"}; !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %q, want %q", keys, want)
	}
	if got := d.ObjectURL("orders/_manifests/1.json"); !strings.HasSuffix(got, "/"+prefix+"/orders/_manifests/1.json") {
		t.Errorf("object URL %q", got)
	}
}

func TestS3(t *testing.T) {
	ep := cloudtest.S3Endpoint(t)
	name := createS3Bucket(t)
	under, err := s3.New(t.Context(), name, s3.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's segment is its path escape, kept escaped in the key.
	roundTrip(t, "s3://"+name+"/lake/{tenant}", under, "lake/acme%20corp")

	// The endpoint may come from the URL instead of the environment.
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	d, err := destination.Open(t.Context(), "s3://"+name+"/other?endpoint="+ep+"&region=us-east-1", "")
	if err != nil {
		t.Fatalf("open with ?endpoint=: %v", err)
	}
	d.Close()
}

func TestS3MissingBucket(t *testing.T) {
	cloudtest.S3Endpoint(t)
	_, err := destination.Open(t.Context(), "s3://hw-there-is-no-such-bucket/lake", "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `bucket "hw-there-is-no-such-bucket" does not exist`) {
		t.Fatalf("want a permanent error naming the bucket, got %v", err)
	}
}

func TestS3WrongCredentials(t *testing.T) {
	cloudtest.S3Endpoint(t)
	name := createS3Bucket(t)
	const secret = "not-the-secret-9f8e7d"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	start := time.Now()
	_, err := destination.Open(t.Context(), "s3://"+name+"/lake", "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), "AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("want a permanent error saying what to check, got %v", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the secret appears in the error: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refused credentials took %v to report: they must not be retried", d)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "nobody")
	_, err = destination.Open(t.Context(), "s3://"+name+"/lake", "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("unknown access key: %v", err)
	}
}

func TestGCS(t *testing.T) {
	host := os.Getenv("HIGHWATER_TEST_GCS_ENDPOINT")
	if host == "" {
		t.Skip("HIGHWATER_TEST_GCS_ENDPOINT is not set: run scripts/servers.sh start and source its env file")
	}
	t.Setenv("STORAGE_EMULATOR_HOST", host)
	name := randomName()
	under, err := gcs.New(t.Context(), name, gcs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := under.Client().Bucket(name).Create(t.Context(), "highwater-test", nil); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, "gs://"+name+"/lake", under, "lake")
	_, err = destination.Open(t.Context(), "gs://hw-there-is-no-such-bucket/lake", "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `"hw-there-is-no-such-bucket" does not exist`) {
		t.Fatalf("missing bucket: %v", err)
	}
}

func TestAzure(t *testing.T) {
	cs := os.Getenv("HIGHWATER_TEST_AZURE_CONNECTION_STRING")
	if cs == "" {
		t.Skip("HIGHWATER_TEST_AZURE_CONNECTION_STRING is not set: run scripts/servers.sh start and source its env file")
	}
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", cs)
	for _, scheme := range []string{"azblob", "az"} {
		t.Run(scheme, func(t *testing.T) {
			name := randomName()
			under, err := azure.New(t.Context(), name, azure.Options{ConnectionString: cs})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := under.Container().Create(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = under.Container().Delete(context.Background(), nil) })
			roundTrip(t, scheme+"://"+name+"/lake", under, "lake")
		})
	}
	_, err := destination.Open(t.Context(), "azblob://hw-there-is-no-such-container/lake", "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `"hw-there-is-no-such-container" does not exist`) {
		t.Fatalf("missing container: %v", err)
	}
}

// TestTenantSegments opens a file destination for tenants that are not
// plain names: each must land in exactly one segment of its own, directly
// under the destination's parent, and no two may share one.
func TestTenantSegments(t *testing.T) {
	root := t.TempDir()
	tenants := []string{"", ".", "..", "a/b", "a%2Fb", "../x", `back\slash`, "two words", "ünï 码", "%00", "%2E", "~", "a;b?c#d", "\t"}
	seen := map[string]string{}
	for _, tenant := range tenants {
		d, err := destination.OpenTenant(t.Context(), "file://"+root+"/lake/{tenant}/x", &tenant)
		if err != nil {
			t.Fatalf("open for tenant %q: %v", tenant, err)
		}
		if err := d.Put(t.Context(), "m/k", strings.NewReader(tenant), objstore.PutOptions{IfNotExist: true}); err != nil {
			t.Fatalf("put for tenant %q: %v", tenant, err)
		}
		d.Close()
		seg, err := destination.TenantSegment(tenant)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[seg]; ok {
			t.Fatalf("tenants %q and %q share the segment %q", other, tenant, seg)
		}
		seen[seg] = tenant
		got, err := os.ReadFile(root + "/lake/" + seg + "/x/m/k")
		if err != nil || string(got) != tenant {
			t.Fatalf("tenant %q: segment %q holds %q, %v", tenant, seg, got, err)
		}
	}
	entries, err := os.ReadDir(root + "/lake")
	if err != nil || len(entries) != len(tenants) {
		t.Fatalf("lake holds %d entries, want one per tenant (%d): %v", len(entries), len(tenants), err)
	}
	if _, err := destination.TenantSegment("a\x00b"); err == nil {
		t.Fatal("a tenant with NUL was accepted")
	}
	if _, err := destination.Open(t.Context(), "file://"+root+"/{tenant}", ""); err == nil || !strings.Contains(err.Error(), "no tenant is set") {
		t.Fatalf("open without a tenant: %v", err)
	}
}

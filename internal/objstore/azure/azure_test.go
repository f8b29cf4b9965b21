package azure_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/azure"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
	"github.com/highwater-dev/highwater/internal/objstore/retry"
)

func newBucket(t *testing.T) *azure.Bucket {
	name := cloudtest.AzureContainer(t)
	// Smaller blocks than the default make the 64 MiB stream many blocks.
	b, err := azure.New(t.Context(), name, azure.Options{ConnectionString: cloudtest.AzureConnectionString(t), BlockSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) { objstoretest.RunCloud(t, newBucket) }

func TestErrors(t *testing.T) {
	cs := cloudtest.AzureConnectionString(t)
	ctx := t.Context()
	b, err := azure.New(ctx, "hw-no-such-container", azure.Options{ConnectionString: cs})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(ctx, "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), `"hw-no-such-container" does not exist`) {
		t.Errorf("missing container: %v", err)
	}

	good := newBucket(t)
	const wrongKey = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmcta2V5LXdyb25nLWtleQ=="
	bad := cs[:strings.Index(cs, "AccountKey=")] + "AccountKey=" + wrongKey + cs[strings.Index(cs, ";BlobEndpoint"):]
	b, err = azure.New(ctx, good.Name(), azure.Options{ConnectionString: bad})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(ctx, "")
	if !errors.Is(err, objstore.ErrPermanent) || !strings.Contains(err.Error(), "AZURE_STORAGE") {
		t.Errorf("wrong key: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), wrongKey) {
		t.Errorf("the key leaked into the error: %v", err)
	}
	if _, err := azure.New(ctx, "c", azure.Options{}); !errors.Is(err, objstore.ErrPermanent) {
		t.Errorf("no account: %v", err)
	}
}

// proxy forwards to Azurite and counts requests; corrupt flips a byte of
// every request body that carries blob data, as a faulty link would. The
// shared-key signature does not cover the body, so only a checksum that the
// service verifies can notice.
type proxy struct {
	requests atomic.Int64
	corrupt  bool
}

// through returns a connection string that reaches Azurite through p.
func (p *proxy) through(t *testing.T, cs string) string {
	t.Helper()
	m := regexp.MustCompile(`BlobEndpoint=([^;]+)`).FindStringSubmatch(cs)
	if m == nil {
		t.Fatalf("no BlobEndpoint in the test connection string")
	}
	target, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.ErrorLog = log.New(io.Discard, "", 0) // a refused upload cancels its other blocks
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.corrupt && r.Method == http.MethodPut && r.ContentLength > 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			body[len(body)/2] ^= 0x01
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.Replace(cs, m[0], "BlobEndpoint="+srv.URL+target.Path, 1)
}

// TestCorruptedUploadRefused shows that every upload carries a checksum the
// store verifies: a body damaged on the way is refused, and nothing appears.
func TestCorruptedUploadRefused(t *testing.T) {
	name := cloudtest.AzureContainer(t)
	p := &proxy{corrupt: true}
	b, err := azure.New(t.Context(), name, azure.Options{ConnectionString: p.through(t, cloudtest.AzureConnectionString(t)), BlockSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{100, 3<<20 + 7} { // one Put Blob; several Put Blocks
		key := fmt.Sprintf("m/data/%d", size)
		err := b.Put(t.Context(), key, bytes.NewReader(bytes.Repeat([]byte("highwater"), size/9+1)[:size]), objstore.PutOptions{})
		// Azure says Md5Mismatch, Azurite "Provided contentMD5 doesn't match".
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "md5") {
			t.Errorf("put of %d corrupted bytes: %v, want an MD5 mismatch", size, err)
		}
		if _, err := newBucketNamed(t, name).Stat(t.Context(), key); !errors.Is(err, objstore.ErrNotExist) {
			t.Errorf("after a refused put of %d bytes, stat: %v, want not exist", size, err)
		}
	}
}

func newBucketNamed(t *testing.T, name string) *azure.Bucket {
	b, err := azure.New(t.Context(), name, azure.Options{ConnectionString: cloudtest.AzureConnectionString(t)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNotSupportedIsPermanent: a store that does not implement something
// answers the same every time, so neither the SDK nor package retry asks
// again. Strict Azurite refuses x-ms-content-crc64 with 500
// FeatureNotSupported; other stores and proxies say 501.
func TestNotSupportedIsPermanent(t *testing.T) {
	t.Run("FeatureNotSupported", func(t *testing.T) {
		name := cloudtest.AzureContainer(t)
		p := &proxy{}
		b, err := azure.New(t.Context(), name, azure.Options{ConnectionString: p.through(t, cloudtest.AzureConnectionString(t))})
		if err != nil {
			t.Fatal(err)
		}
		id := base64.StdEncoding.EncodeToString([]byte("block-0000"))
		_, err = b.Container().NewBlockBlobClient("k").StageBlock(t.Context(), id, streaming.NopCloser(strings.NewReader("data")),
			&blockblob.StageBlockOptions{TransactionalValidation: blob.TransferValidationTypeComputeCRC64()})
		if !bloberror.HasCode(err, "FeatureNotSupported") {
			t.Skipf("this Azurite accepts x-ms-content-crc64 (loose mode?): %v", err)
		}
		if n := p.requests.Load(); n != 1 {
			t.Errorf("the SDK sent %d requests for a FeatureNotSupported answer, want 1", n)
		}
		err = b.Classify(err)
		if !errors.Is(err, objstore.ErrPermanent) || errors.Is(err, objstore.ErrTransient) {
			t.Errorf("FeatureNotSupported classified as %v, want permanent", err)
		}
	})
	t.Run("501", func(t *testing.T) {
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.WriteHeader(http.StatusNotImplemented)
		}))
		t.Cleanup(srv.Close)
		const key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
		b, err := azure.New(t.Context(), "c", azure.Options{Account: "devstoreaccount1", Key: key, Endpoint: srv.URL + "/devstoreaccount1"})
		if err != nil {
			t.Fatal(err)
		}
		err = retry.New(b, retry.Policy{}).Put(t.Context(), "k", strings.NewReader("data"), objstore.PutOptions{})
		if !errors.Is(err, objstore.ErrPermanent) {
			t.Errorf("put answered 501: %v, want permanent", err)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("%d requests for a 501 answer, want 1", n)
		}
	})
}

// Package azure is the Azure Blob Storage backend of objstore, for
// azblob://container/prefix and az://container/prefix (the scheme of the
// fsspec/adlfs ecosystem, which DuckDB and Spark users already write).
//
// Credentials, first match wins:
//   - AZURE_STORAGE_CONNECTION_STRING (this is how the tests reach Azurite);
//   - AZURE_STORAGE_ACCOUNT (or ?account=) with AZURE_STORAGE_KEY: shared key;
//   - AZURE_STORAGE_ACCOUNT (or ?account=) alone: DefaultAzureCredential
//     (environment, workload identity, managed identity, Azure CLI).
//
// The service URL is https://<account>.blob.core.windows.net unless
// ?endpoint= says otherwise (sovereign clouds, Azurite).
//
// Uploads stream as block blobs: blocks of BlockSize bytes, Concurrency in
// flight, each sent with a Content-MD5 that the service verifies; the blob
// appears only when the block list is committed, so a failed source or a
// cancelled context leaves nothing visible (staged blocks expire on their
// own).
//
// The checksum is MD5, not the SDK's CRC64 (x-ms-content-crc64): Azure
// accepts both, but Azurite in its default strict mode refuses CRC64 with
// 500 FeatureNotSupported. Falling back after a refusal is not possible for
// a streamed body, which cannot be sent again, and probing each store first
// costs a request and a second code path that real Azure never takes; an MD5
// per block catches corruption in transit as well as a CRC64 does. Create-if-absent is If-None-Match: * on the commit, answered 409
// BlobAlreadyExists (or 412) when the key is taken.
package azure

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Defaults for Options, matching the S3 backend: 16 MiB blocks, four in
// flight.
const (
	DefaultBlockSize   = 16 << 20
	DefaultConcurrency = 4
)

// Options configure a Bucket.
type Options struct {
	// ConnectionString, when set, carries account, key and endpoint.
	ConnectionString string
	// Account and Key give shared-key access; without Key,
	// DefaultAzureCredential is used.
	Account string
	Key     string
	// Endpoint is the service URL; it defaults to
	// https://<Account>.blob.core.windows.net/.
	Endpoint string
	// BlockSize and Concurrency bound an upload's memory.
	BlockSize   int64
	Concurrency int
}

// Bucket is one container.
type Bucket struct {
	c    *container.Client
	name string
	opts Options
}

var _ objstore.Bucket = (*Bucket)(nil)

// New connects to containerName. It does not call the service: see Check.
func New(ctx context.Context, containerName string, opts Options) (*Bucket, error) {
	if opts.BlockSize <= 0 {
		opts.BlockSize = DefaultBlockSize
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	copts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		// The SDK retries single requests, and so single staged blocks,
		// from its buffers; the decorator in package retry cannot do that
		// for a streamed body. Slightly more patient than the default 3.
		Retry: policy.RetryOptions{MaxRetries: 4, RetryDelay: 500 * time.Millisecond, MaxRetryDelay: 16 * time.Second,
			ShouldRetry: shouldRetry},
		// Before the retry and signing policies: Content-MD5 is signed.
		PerCallPolicies: []policy.Policy{contentMD5{}},
	}}
	var client *azblob.Client
	var err error
	switch {
	case opts.ConnectionString != "":
		client, err = azblob.NewClientFromConnectionString(opts.ConnectionString, copts)
		if err != nil {
			// The SDK's message may quote the string, key included.
			return nil, fmt.Errorf("azure: the storage connection string is malformed: %w", objstore.ErrPermanent)
		}
	case opts.Account == "":
		return nil, fmt.Errorf("azure: no storage account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT (or ?account=) with AZURE_STORAGE_KEY or an Azure identity: %w", objstore.ErrPermanent)
	default:
		endpoint := opts.Endpoint
		if endpoint == "" {
			endpoint = "https://" + opts.Account + ".blob.core.windows.net/"
		}
		if opts.Key != "" {
			cred, kerr := azblob.NewSharedKeyCredential(opts.Account, opts.Key)
			if kerr != nil {
				return nil, fmt.Errorf("azure: AZURE_STORAGE_KEY is not a valid account key: %w", objstore.ErrPermanent)
			}
			client, err = azblob.NewClientWithSharedKeyCredential(endpoint, cred, copts)
		} else {
			cred, cerr := azidentity.NewDefaultAzureCredential(nil)
			if cerr != nil {
				return nil, fmt.Errorf("azure: no credentials: set AZURE_STORAGE_KEY or configure an Azure identity: %w: %w", objstore.ErrPermanent, cerr)
			}
			client, err = azblob.NewClient(endpoint, cred, copts)
		}
		if err != nil {
			return nil, fmt.Errorf("create Azure client for %s: %w: %w", endpoint, objstore.ErrPermanent, err)
		}
	}
	return &Bucket{c: client.ServiceClient().NewContainerClient(containerName), name: containerName, opts: opts}, nil
}

// OpenURL opens azblob://container/... or az://container/..., taking
// credentials from the environment (see the package comment) and the
// parameters account= and endpoint= from the URL. The URL's path is not
// used: the caller roots the bucket at it.
func OpenURL(ctx context.Context, u *url.URL) (*Bucket, error) {
	opts := Options{
		ConnectionString: os.Getenv("AZURE_STORAGE_CONNECTION_STRING"),
		Account:          os.Getenv("AZURE_STORAGE_ACCOUNT"),
		Key:              os.Getenv("AZURE_STORAGE_KEY"),
	}
	for k, v := range u.Query() {
		val := v[len(v)-1]
		switch k {
		case "account":
			if val != opts.Account {
				// Another account than the environment's: its key and
				// connection string are not for this one.
				opts.ConnectionString, opts.Key = "", ""
			}
			opts.Account = val
		case "endpoint":
			if err := objstore.CheckEndpoint(val, "AZURE_STORAGE_KEY or AZURE_STORAGE_CONNECTION_STRING"); err != nil {
				return nil, fmt.Errorf("azure: %w", err)
			}
			opts.Endpoint = val
		default:
			return nil, fmt.Errorf("azure: unknown URL parameter %q: use account or endpoint: %w", k, objstore.ErrPermanent)
		}
	}
	if opts.Endpoint != "" {
		// An explicit endpoint wins over the connection string's.
		opts.ConnectionString = ""
	}
	return New(ctx, u.Host, opts)
}

// Name is the container's name.
func (b *Bucket) Name() string { return b.name }

// Container returns the SDK client, for tests.
func (b *Bucket) Container() *container.Client { return b.c }

// Check lists at most one blob under prefix, so that a missing container or
// bad credentials fail before any work starts.
func (b *Bucket) Check(ctx context.Context, prefix string) error {
	p := b.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix, MaxResults: to.Ptr[int32](1)})
	if _, err := p.NextPage(ctx); err != nil {
		return fmt.Errorf("check container %s: %w", b.name, b.classify(err, false))
	}
	return nil
}

// Put streams r as a block blob.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	// No TransactionalValidation: contentMD5 checksums each request.
	uo := &azblob.UploadStreamOptions{
		BlockSize:   b.opts.BlockSize,
		Concurrency: b.opts.Concurrency,
	}
	if opts.ContentType != "" {
		uo.HTTPHeaders = &blob.HTTPHeaders{BlobContentType: &opts.ContentType}
	}
	if opts.IfNotExist {
		uo.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}
	}
	_, err := b.c.NewBlockBlobClient(key).UploadStream(ctx, r, uo)
	if err != nil {
		return objstore.PutError(ctx, key, b.classify(err, opts.IfNotExist))
	}
	return nil
}

// Get reads the whole blob.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.GetRange(ctx, key, 0, -1)
}

// GetRange reads length bytes from offset, or to the end if length < 0.
// The body resumes by itself after a dropped connection (RetryReader).
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	if length == 0 {
		return objstore.ReadNothing(ctx, b.Stat, key)
	}
	o := &blob.DownloadStreamOptions{}
	if offset > 0 || length > 0 {
		o.Range = blob.HTTPRange{Offset: offset, Count: max(length, 0)}
	}
	resp, err := b.c.NewBlobClient(key).DownloadStream(ctx, o)
	if err != nil {
		if offset > 0 && bloberror.HasCode(err, bloberror.InvalidRange) {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, fmt.Errorf("get %s: %w", key, b.classify(err, false))
	}
	return resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3}), nil
}

// Stat reads the blob's properties.
func (b *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.Attrs{}, err
	}
	p, err := b.c.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("stat %s: %w", key, b.classify(err, false))
	}
	return objstore.Attrs{Key: key, Size: deref(p.ContentLength), ModTime: deref(p.LastModified)}, nil
}

// List pages through the container's flat listing, which is in lexical
// order and recursive.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return b.ListAfter(ctx, prefix, "", fn)
}

// ListAfter pages through the whole listing and skips the keys up to
// after: the flat listing has no start-after parameter that Azurite and
// every service version honour (the marker is opaque), so it costs what
// List costs.
func (b *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	p := b.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, b.classify(err, false))
		}
		for _, it := range page.Segment.BlobItems {
			if deref(it.Name) <= after {
				continue
			}
			a := objstore.Attrs{Key: deref(it.Name)}
			if it.Properties != nil {
				a.Size = deref(it.Properties.ContentLength)
				a.ModTime = deref(it.Properties.LastModified)
			}
			if err := fn(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the blob and its snapshots; an absent key is not an error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	_, err := b.c.NewBlobClient(key).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: to.Ptr(blob.DeleteSnapshotsOptionTypeInclude)})
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, b.classify(err, false))
	}
	return nil
}

// Close does nothing: the SDK's connections are pooled per process.
func (b *Bucket) Close() error { return nil }

// classify maps SDK errors to the objstore sentinels. conditional says the
// request carried If-None-Match: *.
func (b *Bucket) classify(err error, conditional bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	status := 0
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status = re.StatusCode
	}
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return fmt.Errorf("container %q does not exist (check the destination URL and account): %w: %w", b.name, objstore.ErrPermanent, err)
	case conditional && (bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) ||
		status == http.StatusConflict || status == http.StatusPreconditionFailed):
		return fmt.Errorf("%w: %w", objstore.ErrExist, err)
	case bloberror.HasCode(err, bloberror.BlobNotFound) || status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", objstore.ErrNotExist, err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.InvalidAuthenticationInfo, bloberror.AccountIsDisabled):
		// A wrong key is 403 AuthenticationFailed on Azure (and
		// AuthorizationFailure on Azurite), a missing role 403
		// AuthorizationPermissionMismatch: name both remedies.
		return fmt.Errorf("access denied to container %q: check AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT/AZURE_STORAGE_KEY, or the identity's role (Storage Blob Data Contributor): %w: %w", b.name, objstore.ErrPermanent, err)
	case notSupported(status, re):
		return fmt.Errorf("the store does not support a feature this request needs: %w: %w", objstore.ErrPermanent, err)
	case status >= 400:
		return objstore.StatusError(status, err)
	}
	var ae *azidentity.AuthenticationFailedError
	if errors.As(err, &ae) || strings.Contains(err.Error(), "DefaultAzureCredential") {
		return fmt.Errorf("no usable Azure identity: set AZURE_STORAGE_KEY or log in (az login, managed identity): %w: %w", objstore.ErrPermanent, err)
	}
	return err
}

// notSupported says whether the service refused a request for something it
// does not implement: that answer is the same however often it is asked.
// Azurite says 500 FeatureNotSupported, a proxy or store may say 501.
func notSupported(status int, re *azcore.ResponseError) bool {
	return status == http.StatusNotImplemented || (re != nil && re.ErrorCode == "FeatureNotSupported")
}

// shouldRetry is the SDK's default retry rule (transport errors and 408,
// 429, 500, 502, 503, 504) without the refusals that notSupported names, so
// that a store that cannot do something says so at once.
func shouldRetry(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	if notSupported(resp.StatusCode, &azcore.ResponseError{ErrorCode: resp.Header.Get("x-ms-error-code")}) {
		return false
	}
	return runtime.HasStatusCode(resp, http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout)
}

// contentMD5 sets Content-MD5 on requests that carry blob data (Put Blob for
// a small upload, Put Block for each block of a large one), so that the
// service verifies what it received. Their bodies are in-memory blocks, so
// reading them twice is cheap.
type contentMD5 struct{}

func (contentMD5) Do(req *policy.Request) (*http.Response, error) {
	r := req.Raw()
	comp := r.URL.Query().Get("comp")
	// The key as the SDK writes it, not canonicalised: its shared-key
	// signer looks the header up by that exact spelling.
	const key = "Content-MD5"
	//lint:ignore SA1008 the SDK's signer reads this exact, uncanonical key
	if r.Method == http.MethodPut && req.Body() != nil && len(r.Header[key]) == 0 && (comp == "" || comp == "block") {
		h := md5.New()
		if _, err := io.Copy(h, req.Body()); err != nil {
			return nil, fmt.Errorf("checksum request body: %w", err)
		}
		if err := req.RewindBody(); err != nil {
			return nil, fmt.Errorf("checksum request body: %w", err)
		}
		r.Header[key] = []string{base64.StdEncoding.EncodeToString(h.Sum(nil))}
	}
	return req.Next()
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// Package s3 is the Amazon S3 backend of objstore (s3://bucket/prefix), built
// on aws-sdk-go-v2. It also serves S3-compatible stores: with an endpoint set
// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or ?endpoint=) it switches to
// path-style addressing, which is what those stores expect.
//
// Credentials and region come from the SDK's default chain (environment,
// shared config and credentials files, SSO, web identity, container and
// instance roles); ?region= overrides the region.
//
// Uploads stream through the SDK's upload manager: parts of PartSize bytes,
// Concurrency of them in flight, so memory is bounded by
// PartSize × (Concurrency+1) whatever the object's size. Every part carries a
// CRC32C checksum that the store verifies. Create-if-absent is
// If-None-Match: *, sent on PutObject and on CompleteMultipartUpload, so a
// large conditional upload also becomes visible only if the key was free. A
// failed or cancelled multipart upload is aborted, so nothing is left
// visible, nor billed as orphaned parts.
//
// URL query parameters:
//
//	endpoint=http://host:port   S3-compatible endpoint (implies path style)
//	region=eu-west-1            region
//	use_path_style=true         path-style addressing without an endpoint
//	sse=AES256                  server-side encryption with S3-managed keys
//	sse=aws:kms[&kms_key_id=ID] server-side encryption with KMS
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/highwater-dev/highwater/internal/objstore"
)

// Defaults for Options. 16 MiB parts allow objects up to 160 GB (10,000
// parts) and keep the request count low; four in flight saturate a typical
// link while holding at most 80 MiB.
const (
	DefaultPartSize    = 16 << 20
	DefaultConcurrency = 4
	// sdkMaxAttempts is the SDK's own per-request retry budget (3 by
	// default). It retries single parts from their buffers, which the
	// retry decorator above cannot do for a streamed body.
	sdkMaxAttempts = 5
)

// Options configure a Bucket. The zero value uses the SDK's defaults.
type Options struct {
	// Region overrides the region of the default chain.
	Region string
	// Endpoint is the base URL of an S3-compatible store. When empty, the
	// SDK's AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL are honoured.
	Endpoint string
	// UsePathStyle forces path-style addressing; it is implied by any
	// endpoint.
	UsePathStyle bool
	// SSE is "", "AES256" or "aws:kms"; KMSKeyID goes with aws:kms.
	SSE      string
	KMSKeyID string
	// PartSize and Concurrency bound an upload's memory.
	PartSize    int64
	Concurrency int
}

// Bucket is an S3 bucket.
type Bucket struct {
	client *s3.Client
	//lint:ignore SA1019 its successor, transfermanager, is still v0; the upload manager is maintained and does what we need
	uploader *manager.Uploader
	bucket   string
	opts     Options
}

var _ objstore.Bucket = (*Bucket)(nil)

// New connects to bucket. It does not call the store: see Check.
func New(ctx context.Context, bucket string, opts Options) (*Bucket, error) {
	switch opts.SSE {
	case "", string(types.ServerSideEncryptionAes256), string(types.ServerSideEncryptionAwsKms):
	default:
		return nil, fmt.Errorf("s3: unknown server-side encryption %q: use AES256 or aws:kms: %w", opts.SSE, objstore.ErrPermanent)
	}
	if opts.KMSKeyID != "" && opts.SSE != string(types.ServerSideEncryptionAwsKms) {
		return nil, fmt.Errorf("s3: kms_key_id needs sse=aws:kms: %w", objstore.ErrPermanent)
	}
	if opts.PartSize == 0 {
		opts.PartSize = DefaultPartSize
	}
	if opts.PartSize < manager.MinUploadPartSize {
		return nil, fmt.Errorf("s3: part size %d is below the minimum of 5 MiB: %w", opts.PartSize, objstore.ErrPermanent)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		// The SDK refuses to sign without a region. S3 redirects a request
		// to a bucket's own region, and S3-compatible stores mostly ignore
		// it, so us-east-1 is the conventional fallback.
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		// o.BaseEndpoint is also set from AWS_ENDPOINT_URL(_S3) or the
		// shared config by now: any custom endpoint means an S3-compatible
		// store, and those rarely serve virtual-hosted buckets.
		if o.BaseEndpoint != nil || opts.UsePathStyle {
			o.UsePathStyle = true
		}
		// The SDK writes to stderr by default, e.g. a warning on every read
		// of a multipart object ("skipped validation of multipart
		// checksum"); route it to slog at debug level instead.
		o.Logger = logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			slog.Debug(fmt.Sprintf(format, v...), "sdk", "aws", "level", string(c))
		})
		if cfg.RetryMaxAttempts == 0 && cfg.Retryer == nil {
			o.RetryMaxAttempts = sdkMaxAttempts
		}
	})
	//lint:ignore SA1019 its successor, transfermanager, is still v0; the upload manager is maintained and does what we need
	uploader := manager.NewUploader(client, func(u *manager.Uploader) {
		u.PartSize = opts.PartSize
		u.Concurrency = opts.Concurrency
	})
	return &Bucket{client: client, uploader: uploader, bucket: bucket, opts: opts}, nil
}

// OpenURL opens s3://bucket/... with the query parameters of the package
// comment. The URL's path is not used: the caller roots the bucket at it.
func OpenURL(ctx context.Context, u *url.URL) (*Bucket, error) {
	var opts Options
	for k, v := range u.Query() {
		val := v[len(v)-1]
		switch k {
		case "endpoint":
			if err := objstore.CheckEndpoint(val, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"); err != nil {
				return nil, fmt.Errorf("s3: %w", err)
			}
			opts.Endpoint = val
		case "region":
			opts.Region = val
		case "use_path_style":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return nil, fmt.Errorf("s3: use_path_style=%q is not a boolean: %w", val, objstore.ErrPermanent)
			}
			opts.UsePathStyle = b
		case "sse":
			opts.SSE = val
		case "kms_key_id":
			opts.KMSKeyID = val
		default:
			return nil, fmt.Errorf("s3: unknown URL parameter %q: use endpoint, region, use_path_style, sse or kms_key_id: %w", k, objstore.ErrPermanent)
		}
	}
	return New(ctx, u.Host, opts)
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.bucket }

// Client returns the SDK client, for tests and benchmarks.
func (b *Bucket) Client() *s3.Client { return b.client }

// Check makes one cheap listing call under prefix, so that a missing bucket
// or bad credentials fail before any work starts.
func (b *Bucket) Check(ctx context.Context, prefix string) error {
	_, err := b.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(b.bucket),
		Prefix:  aws.String(prefix),
		MaxKeys: aws.Int32(1),
	})
	if err != nil {
		return fmt.Errorf("check bucket %s: %w", b.bucket, b.classify(err, false))
	}
	return nil
}

// Put streams r through the upload manager.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, opts objstore.PutOptions) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:            aws.String(b.bucket),
		Key:               aws.String(key),
		Body:              r,
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	}
	if opts.ContentType != "" {
		in.ContentType = aws.String(opts.ContentType)
	}
	if opts.IfNotExist {
		in.IfNoneMatch = aws.String("*")
	}
	if b.opts.SSE != "" {
		in.ServerSideEncryption = types.ServerSideEncryption(b.opts.SSE)
		if b.opts.KMSKeyID != "" {
			in.SSEKMSKeyId = aws.String(b.opts.KMSKeyID)
		}
	}
	//lint:ignore SA1019 its successor, transfermanager, is still v0; the upload manager is maintained and does what we need
	_, err := b.uploader.Upload(ctx, in)
	if err == nil {
		return nil
	}
	var mf manager.MultiUploadFailure
	if errors.As(err, &mf) && mf.UploadID() != "" {
		// The manager aborts on failure, but with the caller's context,
		// which is already done when the failure is a cancellation. Abort
		// again on a fresh deadline so that no parts stay behind; a
		// second abort of the same upload is harmless.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = b.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: aws.String(mf.UploadID()),
		})
	}
	return objstore.PutError(ctx, key, b.classify(err, opts.IfNotExist))
}

// Get reads the whole object.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.GetRange(ctx, key, 0, -1)
}

// GetRange reads part of the object with an HTTP Range request.
func (b *Bucket) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	switch {
	case length == 0:
		return objstore.ReadNothing(ctx, b.Stat, key)
	case offset == 0 && length < 0:
		// No Range header: a range on an empty object is answered 416.
	case length < 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	default:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		var ae smithy.APIError
		if in.Range != nil && errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			// Reading past the end gives nothing, as on the other backends.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, fmt.Errorf("get %s: %w", key, b.classify(err, false))
	}
	return out.Body, nil
}

// Stat is a HEAD request.
func (b *Bucket) Stat(ctx context.Context, key string) (objstore.Attrs, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.Attrs{}, err
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return objstore.Attrs{}, fmt.Errorf("stat %s: %w", key, b.classify(err, false))
	}
	return objstore.Attrs{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List pages through ListObjectsV2, which returns keys in UTF-8 binary
// order, without a delimiter so that the listing is recursive.
func (b *Bucket) List(ctx context.Context, prefix string, fn func(objstore.Attrs) error) error {
	return b.ListAfter(ctx, prefix, "", fn)
}

// ListAfter is List with StartAfter, which S3 applies before it pages.
func (b *Bucket) ListAfter(ctx context.Context, prefix, after string, fn func(objstore.Attrs) error) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(prefix)}
	if after != "" {
		in.StartAfter = aws.String(after)
	}
	p := s3.NewListObjectsV2Paginator(b.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, b.classify(err, false))
		}
		for _, o := range page.Contents {
			if aws.ToString(o.Key) <= after {
				continue // a store that ignores StartAfter lists them all
			}
			a := objstore.Attrs{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}
			if err := fn(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the object; S3 answers an absent key with success too.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		err = b.classify(err, false)
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Close does nothing: the SDK's HTTP connections are pooled per process.
func (b *Bucket) Close() error { return nil }

// classify maps an SDK error to the objstore sentinels, keeping the SDK's
// message. conditional says the request carried If-None-Match, which is the
// only case where 412 and 409 mean "the key is taken".
func (b *Bucket) classify(err error, conditional bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("bucket %q does not exist (check the destination URL and region): %w: %w", b.bucket, objstore.ErrPermanent, err)
	case conditional && (status == http.StatusPreconditionFailed || code == "PreconditionFailed" ||
		status == http.StatusConflict || code == "ConditionalRequestConflict"):
		// 409 ConditionalRequestConflict: a concurrent conditional write
		// to the same key is in flight; one of us wins, and it is not us.
		return fmt.Errorf("%w: %w", objstore.ErrExist, err)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "InvalidToken" ||
		code == "ExpiredToken" || code == "TokenRefreshRequired" ||
		// versitygw answers an unknown access key with 404 and this code.
		code == "XAdminUserNotFound":
		return fmt.Errorf("credentials refused for bucket %q: check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, AWS_SESSION_TOKEN): %w: %w", b.bucket, objstore.ErrPermanent, err)
	case code == "AccessDenied" || status == http.StatusForbidden:
		return fmt.Errorf("access denied to bucket %q: check the credentials (AWS_ACCESS_KEY_ID/AWS_PROFILE) and the bucket's policy: %w: %w", b.bucket, objstore.ErrPermanent, err)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", objstore.ErrNotExist, err)
	case code == "RequestTimeout" || code == "SlowDown" || code == "Throttling" || code == "ThrottlingException" ||
		code == "RequestTimeTooSkewed" || code == "InternalError" || code == "ServiceUnavailable":
		return fmt.Errorf("%w: %w", objstore.ErrTransient, err)
	case status >= 400:
		return objstore.StatusError(status, err)
	}
	var ce interface{ CanceledError() bool }
	if errors.As(err, &ce) && ce.CanceledError() {
		return err
	}
	if strings.Contains(err.Error(), "failed to retrieve credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found") {
		return fmt.Errorf("no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE: %w: %w", objstore.ErrPermanent, err)
	}
	return err
}

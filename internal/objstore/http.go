package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/highwater-dev/highwater/internal/redact"
)

// The rules below are shared by the backends that speak HTTP to their
// store (S3, GCS, Azure), so that each states only its provider's codes.

// StatusError classifies err by the HTTP status the store answered, where
// the backend has no more precise rule: a timeout (408), throttling (429)
// or a server error (5xx) is ErrTransient, any other 4xx ErrPermanent.
// Below 400 (0: no HTTP answer at all) err is returned as it is.
func StatusError(status int, err error) error {
	switch {
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("%w: %w", ErrTransient, err)
	case status >= 400:
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return err
}

// PutError is the error of a failed Put of key: the cause of ctx when ctx
// is done, whatever the SDK made of the cancellation, so that callers see
// why the upload stopped; otherwise err, the store's error as the backend
// classified it.
func PutError(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("put %s: %w", key, context.Cause(ctx))
	}
	return fmt.Errorf("put %s: %w", key, err)
}

// ReadNothing is GetRange of length 0, which no HTTP Range header can ask
// for: the object must exist (stat says ErrNotExist otherwise), and the
// body is empty.
func ReadNothing(ctx context.Context, stat func(context.Context, string) (Attrs, error), key string) (io.ReadCloser, error) {
	if _, err := stat(ctx, key); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(nil)), nil
}

// CheckEndpoint checks the endpoint parameter of a destination URL: an
// http or https URL with a host, without user info, which would be printed
// with it in every error the SDK reports. creds says where credentials go
// instead.
func CheckEndpoint(endpoint, creds string) error {
	ep, err := url.Parse(endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return fmt.Errorf("endpoint %s is not an http(s) URL: %w", redact.URL(endpoint), ErrPermanent)
	}
	if ep.User != nil {
		return fmt.Errorf("endpoint %s carries user info: give credentials in %s instead: %w", redact.URL(endpoint), creds, ErrPermanent)
	}
	return nil
}

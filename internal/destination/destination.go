// Package destination turns a destination URL (file:///lake, s3://bucket/prefix,
// gs://bucket/prefix, azblob://container/prefix or az://container/prefix) into
// an objstore.Bucket rooted at the URL's prefix. It is the one place that
// knows the URL schemes.
//
// A cloud destination is checked when it is opened (one listing call under
// its prefix), so that a missing bucket or refused credentials fail before
// any work starts, and it is wrapped in the retry decorator (package retry).
package destination

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/azure"
	"github.com/highwater-dev/highwater/internal/objstore/file"
	"github.com/highwater-dev/highwater/internal/objstore/gcs"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
	"github.com/highwater-dev/highwater/internal/objstore/retry"
	"github.com/highwater-dev/highwater/internal/objstore/s3"
	"github.com/highwater-dev/highwater/internal/redact"
)

// Destination is an opened lake root.
type Destination struct {
	objstore.Bucket
	// base is the URL of the root, without query or credentials, used to
	// print object URLs.
	base string
	// root is base as a URL: its scheme, bucket and unescaped path.
	root url.URL
}

// ObjectURL is the URL by which engines read the object at key: the root
// and the key joined unescaped, as the Hadoop file systems (Spark, the
// Athena symlink manifest) and DuckDB take a path, so that a key holding
// a literal %20 stays %20.
func (d *Destination) ObjectURL(key string) string {
	return d.base + "/" + key
}

// URL is the object at key as an RFC 3986 URL, every byte of the key that
// a URL path cannot hold escaped: parsed again (url.Parse, or Open of its
// directory), it names exactly that object, whatever a tenant or model
// name holds (a space, '%', '#', '?').
func (d *Destination) URL(key string) string {
	u := d.root
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + key
	return u.String()
}

// String is the root URL, safe to print.
func (d *Destination) String() string { return d.base }

// Open parses raw and opens its backend. tenant replaces a {tenant}
// placeholder (see TenantSegment); an empty tenant means none is set, so
// a placeholder is then an error. OpenTenant opens for any tenant value,
// the empty string included.
func Open(ctx context.Context, raw, tenant string) (*Destination, error) {
	if tenant == "" {
		return OpenTenant(ctx, raw, nil)
	}
	return OpenTenant(ctx, raw, &tenant)
}

// OpenTenant is Open for a tenant that may be any value, or nil for none.
// The prefix may not contain "." or ".." segments.
func OpenTenant(ctx context.Context, raw string, tenant *string) (*Destination, error) {
	u, err := check(raw, tenant)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		b, err := file.New(u.Path)
		if err != nil {
			return nil, fmt.Errorf("open destination: %w", err)
		}
		root := path.Clean(u.Path)
		return &Destination{Bucket: b, base: "file://" + root, root: url.URL{Scheme: "file", Path: root}}, nil
	case "mem":
		// For tests: a fresh, empty in-memory lake.
		return &Destination{Bucket: mem.New(), base: "mem://" + u.Host + u.Path, root: url.URL{Scheme: "mem", Host: u.Host, Path: u.Path}}, nil
	}
	b, err := cloudOpeners[u.Scheme](ctx, u)
	if err != nil {
		return nil, fmt.Errorf("open destination %s: %w", redact.URL(raw), err)
	}
	prefix := strings.Trim(u.Path, "/")
	base := u.Scheme + "://" + u.Host
	if prefix != "" {
		base += "/" + prefix
	}
	root := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/" + prefix}
	return &Destination{Bucket: objstore.WithPrefix(b, prefix), base: base, root: root}, nil
}

// Check finds every error of a destination URL that needs no store: what
// OpenTenant refuses before it opens anything. A command checks its
// destinations with it before it connects to anything.
func Check(raw string, tenant *string) error {
	_, err := check(raw, tenant)
	return err
}

// check parses raw for OpenTenant. Its errors print raw as written (but
// for secrets), never the URL with the tenant put in: the template is what
// the user typed and can fix.
func check(raw string, tenant *string) (*url.URL, error) {
	u, err := ParseTenant(raw, tenant)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "":
		return nil, fmt.Errorf("destination %q has no scheme: use file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix", redact.URL(raw))
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("destination %q: a file URL takes an absolute path, as file:///path", redact.URL(raw))
		}
		return u, checkSegments(raw, u.Path)
	case "mem":
		return u, nil
	}
	if _, ok := cloudOpeners[u.Scheme]; !ok {
		return nil, fmt.Errorf("destination %q: unknown scheme %q: use file, s3, gs, azblob or az", redact.URL(raw), u.Scheme)
	}
	if err := checkSegments(raw, strings.Trim(u.Path, "/")); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("destination %q names no bucket", redact.URL(raw))
	}
	return u, nil
}

// cloudOpeners maps the object-store schemes to their backends. It is
// read-only after initialisation.
var cloudOpeners = map[string]func(context.Context, *url.URL) (objstore.Bucket, error){
	"s3":     openCloud(s3.OpenURL),
	"gs":     openCloud(gcs.OpenURL),
	"azblob": openCloud(azure.OpenURL),
	// az:// is what the fsspec/adlfs ecosystem (and so DuckDB and many
	// Python tools) writes for the same thing.
	"az": openCloud(azure.OpenURL),
}

// checker is what every cloud backend offers besides objstore.Bucket: one
// cheap call that proves the bucket exists and the credentials work.
type checker interface {
	objstore.Bucket
	Check(ctx context.Context, prefix string) error
}

// openCloud adapts a backend's OpenURL: it checks the bucket under the URL's
// prefix and wraps it in the retry decorator.
func openCloud[B checker](open func(context.Context, *url.URL) (B, error)) func(context.Context, *url.URL) (objstore.Bucket, error) {
	return func(ctx context.Context, u *url.URL) (objstore.Bucket, error) {
		b, err := open(ctx, u)
		if err != nil {
			return nil, err
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" {
			prefix += "/"
		}
		policy := retry.DefaultPolicy()
		if err := retry.Do(ctx, policy, func() error { return b.Check(ctx, prefix) }); err != nil {
			b.Close()
			return nil, err
		}
		return retry.New(b, policy), nil
	}
}

// placeholder is what a destination URL holds where the tenant goes.
const placeholder = "{tenant}"

// ParseTenant parses raw and puts the tenant's segment (TenantSegment) in
// the place of a {tenant} placeholder in its path. The placeholder is
// replaced after parsing, in the decoded path, so the escapes stay in the
// object keys as they are: decoding them would turn a tenant's %2F back
// into a slash, and two tenants into one prefix.
func ParseTenant(raw string, tenant *string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &redact.Error{Msg: fmt.Sprintf("parse destination URL %q: %s", redact.URL(raw), redact.ParseError(raw, err)), Err: err}
	}
	if !strings.Contains(raw, placeholder) {
		return u, nil
	}
	if !strings.Contains(u.Path, placeholder) || strings.Contains(u.Host+u.RawQuery+u.Fragment, placeholder) {
		return nil, fmt.Errorf("destination %q: the {tenant} placeholder belongs in the path, after the bucket", redact.URL(raw))
	}
	if tenant == nil {
		return nil, fmt.Errorf("destination %q has a {tenant} placeholder but no tenant is set", redact.URL(raw))
	}
	seg, err := TenantSegment(*tenant)
	if err != nil {
		return nil, err
	}
	u.Path = strings.ReplaceAll(u.Path, placeholder, seg)
	u.RawPath = ""
	return u, nil
}

// TenantSegment is the path segment that holds a tenant's lake: its
// url.PathEscape, which escapes '/', '%', spaces, control and non-ASCII
// bytes, so that every tenant is exactly one segment and two tenants never
// share one. PathEscape leaves three values that are not usable segments,
// and they get encodings that PathEscape itself never produces:
//
//	""   -> %00   (PostgreSQL text cannot hold NUL, so no tenant is "\x00")
//	"."  -> %2E
//	".." -> %2E%2E
//
// A tenant holding NUL is refused for the same reason: no row can match it.
func TenantSegment(tenant string) (string, error) {
	switch tenant {
	case "":
		return "%00", nil
	case ".":
		return "%2E", nil
	case "..":
		return "%2E%2E", nil
	}
	if strings.IndexByte(tenant, 0) >= 0 {
		return "", fmt.Errorf("tenant %q holds a NUL byte, which no PostgreSQL text value can", tenant)
	}
	return url.PathEscape(tenant), nil
}

// checkSegments refuses "." and ".." segments in p, the path of raw.
func checkSegments(raw, p string) error {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("destination %q: its path may not contain %q segments", redact.URL(raw), seg)
		}
	}
	return nil
}

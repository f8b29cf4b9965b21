package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/mem"
)

func TestStatusError(t *testing.T) {
	provider := errors.New("the provider's message")
	for _, c := range []struct {
		status          int
		transient, perm bool
	}{
		{0, false, false}, // no HTTP answer
		{http.StatusOK, false, false},
		{http.StatusNotModified, false, false},
		{http.StatusBadRequest, false, true},
		{http.StatusForbidden, false, true},
		{http.StatusNotFound, false, true},
		{http.StatusConflict, false, true},
		{http.StatusRequestedRangeNotSatisfiable, false, true},
		{http.StatusRequestTimeout, true, false},
		{http.StatusTooManyRequests, true, false},
		{http.StatusInternalServerError, true, false},
		{http.StatusNotImplemented, true, false},
		{http.StatusServiceUnavailable, true, false},
		{599, true, false},
	} {
		err := objstore.StatusError(c.status, provider)
		if !errors.Is(err, provider) || !strings.Contains(err.Error(), provider.Error()) {
			t.Errorf("%d: %v does not keep the provider's error", c.status, err)
		}
		if got := errors.Is(err, objstore.ErrTransient); got != c.transient {
			t.Errorf("%d: transient %v, want %v", c.status, got, c.transient)
		}
		if got := errors.Is(err, objstore.ErrPermanent); got != c.perm {
			t.Errorf("%d: permanent %v, want %v", c.status, got, c.perm)
		}
	}
}

func TestReadNothing(t *testing.T) {
	b := mem.New()
	if err := b.Put(t.Context(), "a", strings.NewReader("abc"), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := objstore.ReadNothing(t.Context(), b.Stat, "a")
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(rc); err != nil || len(body) != 0 {
		t.Errorf("ReadNothing of an object read %q, %v; want nothing", body, err)
	}
	rc.Close()
	if _, err := objstore.ReadNothing(t.Context(), b.Stat, "absent"); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("ReadNothing of a missing object: %v, want ErrNotExist", err)
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:7070", "https://s3.example.com", "https://acct.blob.core.windows.net/"} {
		if err := objstore.CheckEndpoint(ok, "ENV"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:7070", "ftp://host", "http://", "http://key:s3cr3t@127.0.0.1:1", "https://user@host"} {
		err := objstore.CheckEndpoint(bad, "ENV")
		if !errors.Is(err, objstore.ErrPermanent) {
			t.Errorf("%q: %v, want a permanent error", bad, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: the error prints the secret: %v", bad, err)
		}
		if strings.Contains(bad, "@") && !strings.Contains(err.Error(), "give credentials in ENV instead") {
			t.Errorf("%q: %v does not say where credentials go", bad, err)
		}
	}
}

func TestPutError(t *testing.T) {
	store := fmt.Errorf("%w: connection reset", objstore.ErrTransient)
	if err := objstore.PutError(t.Context(), "a/b", store); !errors.Is(err, store) || !strings.HasPrefix(err.Error(), "put a/b: ") {
		t.Errorf("live context: %v, want the store's error under put a/b", err)
	}
	why := errors.New("the run was interrupted")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(why)
	err := objstore.PutError(ctx, "a/b", store)
	if !errors.Is(err, why) || errors.Is(err, objstore.ErrTransient) {
		t.Errorf("cancelled context: %v, want its cause and not the store's transient error", err)
	}
}

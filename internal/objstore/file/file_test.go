package file_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/file"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestNewCreatesNothing checks that opening a bucket at a path that does
// not exist leaves the disk as it was until the first write, and that a
// path below a file is refused at once.
func TestNewCreatesNothing(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "absent")
	b, err := file.New(filepath.Join(parent, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := b.Stat(ctx, "m/x"); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("stat in a missing root: %v", err)
	}
	if err := b.List(ctx, "", func(objstore.Attrs) error { return nil }); err != nil {
		t.Fatalf("list a missing root: %v", err)
	}
	if err := b.Delete(ctx, "m/x"); err != nil {
		t.Fatalf("delete in a missing root: %v", err)
	}
	if _, err := os.Stat(parent); !os.IsNotExist(err) {
		t.Fatalf("reading created %s: %v", parent, err)
	}
	if err := b.Put(ctx, "m/x", strings.NewReader("x"), objstore.PutOptions{IfNotExist: true}); err != nil {
		t.Fatalf("the first put: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "lake", "m", "x")); err != nil {
		t.Fatalf("the first put made no file: %v", err)
	}
	if _, err := file.New(filepath.Join(parent, "lake", "m", "x", "below")); !errors.Is(err, objstore.ErrPermanent) {
		t.Fatalf("a root below a file: want a permanent error, got %v", err)
	}
	if _, err := file.New(filepath.Join(parent, "lake", "m", "x")); !errors.Is(err, objstore.ErrPermanent) {
		t.Fatalf("a root that is a file: want a permanent error, got %v", err)
	}
}

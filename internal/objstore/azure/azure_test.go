package azure_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/azure"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
	"github.com/highwater-dev/highwater/internal/objstore/objstoretest"
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

package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/highwater-dev/highwater/internal/objstore"
	"github.com/highwater-dev/highwater/internal/objstore/cloudtest"
)

// TestRacingSyncs: several syncs of one lagging view at once publish every
// commit once, in order, in contiguous versions, and the table reads.
func TestRacingSyncs(t *testing.T) {
	l := newLake(t, "", itemsDDL, `INSERT INTO items (id, name) VALUES (1, 'one')`)
	l.export(false)
	l.sync()
	for i := 2; i <= 6; i++ {
		l.exec(fmt.Sprintf(`INSERT INTO items (id, name) VALUES (%d, 'n%d')`, i, i),
			`UPDATE items SET name = name || '+', updated_at = now() WHERE id = 1`)
		l.export(false)
	}
	const racers = 4
	var wg sync.WaitGroup
	start := make(chan struct{})
	published := make([]int, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := l.view()
			<-start
			res, err := v.Sync(context.Background(), nil)
			if err == nil {
				published[i] = res.Published
				t.Logf("racer %d published %d versions and lost %d", i, res.Published, res.Lost)
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
		total += published[i]
	}
	if total != 5 {
		t.Fatalf("the racers published %v versions, %d in all, want 5 (one per commit)", published, total)
	}
	want := []string{"1", "2", "3", "4", "5", "6"}
	if got := snapshotSeqs(t, l.table()); !slices.Equal(got, want) {
		t.Fatalf("snapshots carry seqs %v, want %v", got, want)
	}
	// v1 (the schema), v2 (seq 1), then one version per commit: no gap,
	// nothing beyond.
	d := l.open()
	for n := 1; n <= 8; n++ {
		_, err := d.Stat(context.Background(), l.model+"/metadata/v"+strconv.Itoa(n)+".metadata.json")
		if exists := err == nil; exists != (n <= 7) {
			t.Fatalf("metadata version %d exists: %v (%v)", n, exists, err)
		}
		if err != nil && !errors.Is(err, objstore.ErrNotExist) {
			t.Fatal(err)
		}
	}
	l.compare(itemCols...)
}

// TestS3 publishes and reads back through S3 (versitygw): iceberg-go's own
// S3 file system reads what highwater's objstore wrote.
func TestS3(t *testing.T) {
	ep := cloudtest.S3Endpoint(t)
	l := newLake(t, cloudtest.S3(t)+"/lake", itemsDDL,
		`INSERT INTO items (id, name, price, tags) VALUES (1, 'one', 1.5, '{a}'), (2, 'two', 2, '{}')`)
	l.props = map[string]string{
		"s3.endpoint": ep, "s3.region": os.Getenv("AWS_REGION"), "s3.force-virtual-addressing": "false",
		"s3.access-key-id": os.Getenv("AWS_ACCESS_KEY_ID"), "s3.secret-access-key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
	}
	l.export(false)
	l.sync()
	l.compare(itemCols...)
	l.exec(`UPDATE items SET name = 'two again', updated_at = now() WHERE id = 2`)
	l.export(false)
	l.dedupe()
	l.sync()
	l.compare(itemCols...)
	if got, want := snapshotSeqs(t, l.table()), []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Fatalf("snapshots carry seqs %v, want %v", got, want)
	}
}

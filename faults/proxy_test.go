package faults_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/highwater-dev/highwater/faults"
)

// TestFlakyObjectStore runs export cycles and a dedupe through a proxy
// that fails about one request in ten in every way a store or network
// does. Each run either succeeds or exits with one clear line; the lake
// verifies through a clean endpoint after every run; and once the faults
// stop, reruns and a dedupe give a lake equal to the source.
func TestFlakyObjectStore(t *testing.T) {
	ep := os.Getenv("HIGHWATER_TEST_S3_ENDPOINT")
	if ep == "" {
		t.Skip("HIGHWATER_TEST_S3_ENDPOINT is not set: run scripts/servers.sh start and source its env file")
	}
	// HIGHWATER_TEST_PROXY_SEED and _RATE replay another sequence of
	// faults, or a harsher one, when hunting a bug.
	seed, rate := uint64(6), 0.10
	if s := os.Getenv("HIGHWATER_TEST_PROXY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HIGHWATER_TEST_PROXY_SEED=%q: %v", s, err)
		}
		seed = v
	}
	if s := os.Getenv("HIGHWATER_TEST_PROXY_RATE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v > 1 {
			t.Fatalf("HIGHWATER_TEST_PROXY_RATE=%q is not a probability", s)
		}
		rate = v
	}
	p, err := faults.NewProxy(ep, faults.ProxyOptions{Rate: rate, Seed: seed, MaxFaults: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	flaky := s3StoreAt(t, ep, p.URL())
	clean := store{name: "s3", url: strings.Replace(flaky.url, "endpoint="+p.URL(), "endpoint="+ep, 1)}
	db := itemsSetup(t, 4000)

	// run runs one command through the proxy and checks how it ended.
	failures, committedOnce := 0, false
	run := func(what string, args ...string) {
		t.Helper()
		r := hw(t, nil, args...)
		if r.code != 0 {
			failures++
			last := r.lastLine()
			if r.killed || strings.Contains(r.stderr, "panic:") || !strings.HasPrefix(last, "highwater "+args[0]+": ") {
				t.Fatalf("%s: exit %d without one clear line:\n%s", what, r.code, r.stderr)
			}
			t.Logf("%s failed cleanly: %s", what, last)
		}
		v := hw(t, nil, "verify", "--dest", clean.url, "--model", "items")
		if v.code == 0 {
			committedOnce = true
			return
		}
		// Before the first commit there is nothing to verify, and
		// verify says so.
		if !committedOnce && strings.Contains(v.lastLine(), `model "items" has no commits`) {
			return
		}
		t.Fatalf("verify after %s (exit %d): %s%s", what, r.code, v.stdout, v.stderr)
	}

	p.Enable(true)
	for i := 0; i < 10; i++ {
		churn(t, db, i)
		if i == 3 {
			// Enough changes for several files, so uploads and
			// checkpoints are hit as well as the log.
			bulkTouch(t, db)
		}
		run(fmt.Sprintf("export %d", i), exportArgs(db, flaky, smallFiles...)...)
	}
	run("dedupe", "dedupe", "--dest", flaky.url, "--model", "items")
	p.Enable(false)

	counts := p.Counts()
	var n int64
	for k, v := range counts {
		proxyFaults[k] += v
		n += v
	}
	faultsInjected.Add(n)
	storesTried["s3+proxy"] = true
	t.Logf("seed %d, rate %.2f, faults injected: %s; %d of 11 runs failed", seed, rate, p, failures)
	if n == 0 {
		t.Fatal("the proxy injected no fault")
	}

	// Without faults: catch up (the first rerun may only resume an
	// interrupted run), deduplicate, and compare.
	for i := 0; i < 2; i++ {
		if r := hw(t, nil, exportArgs(db, clean, smallFiles...)...); r.code != 0 {
			t.Fatalf("clean rerun %d: %s", i, r.stderr)
		}
	}
	if r := hw(t, nil, "dedupe", "--dest", clean.url, "--model", "items"); r.code != 0 {
		t.Fatalf("clean dedupe: %s", r.stderr)
	}
	compare(t, clean, "items", db)
	if r := hw(t, nil, "verify", "--dest", clean.url, "--model", "items"); r.code != 0 {
		t.Fatalf("final verify: %s%s", r.stdout, r.stderr)
	}
}

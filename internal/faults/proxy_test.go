package faults_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/highwater-dev/highwater/internal/faults"
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

// TestProxyKinds checks each kind of fault against a plain upstream: what
// the client sees, whether the request reached the upstream, and that the
// Host header the client sent (and an S3 client signed) arrives unchanged.
func TestProxyKinds(t *testing.T) {
	var hits atomic.Int64
	var hosts sync.Map
	body := strings.Repeat("x", 1000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		hosts.Store(r.Host, true)
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, body)
	}))
	defer up.Close()
	cases := []struct {
		kind, method string
		status       int  // 0: the request fails
		short        bool // the body ends early
		reaches      bool // the upstream sees the request
	}{
		{faults.Status500, http.MethodPut, 500, false, false},
		{faults.Status503, http.MethodGet, 503, false, false},
		{faults.Reset, http.MethodPut, 0, false, false},
		{faults.Truncate, http.MethodGet, 200, true, true},
		{faults.DropResponse, http.MethodPut, 0, false, true},
		{faults.Delay, http.MethodGet, 200, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			p, err := faults.NewProxy(up.URL, faults.ProxyOptions{Rate: 1, Seed: 1, Kinds: []string{tc.kind}, MaxDelay: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.Enable(true)
			before := hits.Load()
			// A fresh transport: no retries and no connection reuse
			// across cases.
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			req, _ := http.NewRequest(tc.method, p.URL()+"/bucket/key", strings.NewReader("payload"))
			resp, err := c.Do(req)
			switch {
			case tc.status == 0:
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want a failed request", resp.StatusCode)
				}
			case err != nil:
				t.Fatal(err)
			default:
				got, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if tc.short != (rerr != nil) || (tc.short && len(got) >= len(body)) {
					t.Fatalf("read %d bytes, error %v; short body wanted: %v", len(got), rerr, tc.short)
				}
			}
			// A lost response still reached the upstream: wait for it.
			time.Sleep(20 * time.Millisecond)
			if reached := hits.Load() > before; reached != tc.reaches {
				t.Fatalf("upstream reached: %v, want %v", reached, tc.reaches)
			}
			if n := p.Counts()[tc.kind]; n != 1 {
				t.Fatalf("counted %d faults of kind %s", n, tc.kind)
			}
		})
	}
	proxyAddrs := 0
	hosts.Range(func(k, _ any) bool {
		if k.(string) == strings.TrimPrefix(up.URL, "http://") {
			t.Errorf("the upstream saw its own address as Host: the client's Host header was rewritten")
		}
		proxyAddrs++
		return true
	})
	if proxyAddrs == 0 {
		t.Fatal("no request reached the upstream")
	}
}

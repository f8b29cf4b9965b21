// Package faults holds what highwater's fault tests need outside of test
// files: a reverse proxy that injects the failures of a real object store
// (errors, resets, short bodies, lost responses, latency) between the
// binary and an S3-compatible test server.
package faults

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kinds of faults the proxy injects.
const (
	// Status500 answers 500 InternalError without reaching the upstream.
	Status500 = "500"
	// Status503 answers 503 SlowDown without reaching the upstream.
	Status503 = "503"
	// Reset resets the client's connection before anything is forwarded.
	Reset = "reset"
	// Truncate forwards a GET and cuts the response body in half, then
	// resets the connection: the client sees an unexpected EOF.
	Truncate = "truncate"
	// DropResponse forwards the request, lets the upstream carry it out,
	// and then resets the client's connection instead of answering: the
	// client cannot tell that its write (or conditional create) happened.
	DropResponse = "drop-response"
	// Delay holds the request for up to MaxDelay before forwarding it.
	Delay = "delay"
)

// Kinds lists every kind, in the order the proxy draws them from.
var Kinds = []string{Status500, Status503, Reset, Truncate, DropResponse, Delay}

// ProxyOptions configure a Proxy.
type ProxyOptions struct {
	// Rate is the probability that a request gets a fault, in [0, 1].
	Rate float64
	// Seed seeds the random choices, so a failing run can be replayed
	// (as far as the order of requests repeats).
	Seed uint64
	// MaxFaults bounds the faults injected over the proxy's life, so a
	// test's runtime is bounded however many retries the client makes.
	// Zero means no bound.
	MaxFaults int64
	// MaxDelay bounds a Delay fault (default 1s).
	MaxDelay time.Duration
	// Kinds restricts the kinds drawn (default: all of Kinds).
	Kinds []string
}

// Proxy is a fault-injecting reverse proxy on 127.0.0.1.
//
// It forwards requests to the upstream with the Host header the client
// sent: an S3 client signs the Host header (SigV4), so the client is
// pointed at the proxy, signs the proxy's address, and the upstream checks
// the signature against that same Host. Only the dial target changes.
type Proxy struct {
	upstream *url.URL
	opts     ProxyOptions
	ln       net.Listener
	srv      *http.Server
	client   *http.Transport

	enabled atomic.Bool
	mu      sync.Mutex // guards rng and counts
	rng     *rand.Rand
	counts  map[string]int64
	total   int64
}

// NewProxy starts a proxy in front of upstream (an http:// base URL). It
// starts with faults off: call Enable.
func NewProxy(upstream string, opts ProxyOptions) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("faults: upstream %q is not an http:// URL", upstream)
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		upstream: u,
		opts:     opts,
		ln:       ln,
		rng:      rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		counts:   map[string]int64{},
		// No compression: the bytes the client signed and checksummed
		// pass through unchanged, both ways.
		client: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64, Proxy: nil},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's base URL, to use as the client's endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Enable turns fault injection on or off; with it off the proxy is a
// plain pass-through.
func (p *Proxy) Enable(on bool) { p.enabled.Store(on) }

// Counts returns the faults injected so far, by kind.
func (p *Proxy) Counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// String prints the counts in a stable order, for logs.
func (p *Proxy) String() string {
	c := p.Counts()
	var parts []string
	for _, k := range Kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.client.CloseIdleConnections()
	return err
}

// draw decides whether this request gets a fault, and which. A kind that
// does not apply to the request is drawn again from the rest, so that the
// rate holds for every kind of request.
func (p *Proxy) draw(r *http.Request) (string, time.Duration) {
	if !p.enabled.Load() {
		return "", 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opts.MaxFaults > 0 && p.total >= p.opts.MaxFaults {
		return "", 0
	}
	if p.rng.Float64() >= p.opts.Rate {
		return "", 0
	}
	kinds := Kinds
	if len(p.opts.Kinds) > 0 {
		kinds = p.opts.Kinds
	}
	if r.Method != http.MethodGet && slices.Contains(kinds, Truncate) {
		// Only a body the client reads can be cut short.
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k == Truncate })
		if len(kinds) == 0 {
			return "", 0
		}
	}
	k := kinds[p.rng.IntN(len(kinds))]
	p.counts[k]++
	p.total++
	return k, time.Duration(p.rng.Int64N(int64(p.opts.MaxDelay)))
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, delay := p.draw(r)
	switch kind {
	case Status500, Status503:
		// Read the body first, as a server that failed late would, so
		// the client is not also cut off mid-upload.
		io.Copy(io.Discard, r.Body)
		code, s3code := http.StatusInternalServerError, "InternalError"
		if kind == Status503 {
			code, s3code = http.StatusServiceUnavailable, "SlowDown"
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(code)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the faults proxy</Message></Error>`, s3code)
		return
	case Reset:
		reset(w)
		return
	case Delay:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	switch kind {
	case DropResponse:
		// The upstream has done the work; make sure it finished reading
		// and answering, then lose the answer.
		io.Copy(io.Discard, resp.Body)
		reset(w)
		return
	case Truncate:
		if resp.ContentLength >= 2 {
			truncate(w, resp)
			return
		}
		// Nothing to cut: lose the response instead, which is what a
		// cut before the first byte of the body would look like.
		io.Copy(io.Discard, resp.Body)
		reset(w)
		return
	}
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// forward sends r to the upstream unchanged but for the dial target.
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.Scheme+"://"+p.upstream.Host+r.RequestURI, r.Body)
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // the signed Host header
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return p.client.RoundTrip(out)
}

// reset hijacks the connection and closes it with SO_LINGER 0, so the
// client gets a TCP RST rather than a clean end of stream.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faults: the response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// truncate writes the response's status and headers, with its full
// Content-Length, and half its body, then resets the connection.
func truncate(w http.ResponseWriter, resp *http.Response) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faults: the response writer cannot be hijacked")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	bw := bufio.NewWriter(conn)
	if buf != nil && buf.Writer != nil {
		bw = buf.Writer
	}
	h := resp.Header.Clone()
	for _, k := range []string{"Content-Length", "Transfer-Encoding", "Connection"} {
		h.Del(k)
	}
	fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", resp.Status)
	h.Write(bw)
	fmt.Fprintf(bw, "Content-Length: %d\r\n\r\n", resp.ContentLength)
	io.CopyN(bw, resp.Body, resp.ContentLength/2)
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

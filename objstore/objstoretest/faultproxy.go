package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind is what a FaultProxy does to a request it injects a fault in.
type FaultKind int

const (
	// FaultStatus answers Fault.Status without forwarding the request: the
	// request did not happen.
	FaultStatus FaultKind = iota + 1
	// FaultReset reads part of the request body (half of it, at most
	// 64 KiB), then resets the connection (TCP RST): an upload cut short.
	FaultReset
	// FaultDelay waits Fault.Delay (or until the client gives up), then
	// forwards the request.
	FaultDelay
	// FaultLostSuccess forwards the request, so that it takes effect,
	// then answers Fault.Status instead of the upstream's answer: a
	// success reported as a failure.
	FaultLostSuccess
)

func (k FaultKind) String() string {
	switch k {
	case FaultStatus:
		return "status"
	case FaultReset:
		return "reset"
	case FaultDelay:
		return "delay"
	case FaultLostSuccess:
		return "lost-success"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is one fault a FaultProxy injects.
type Fault struct {
	Kind   FaultKind
	Status int           // FaultStatus, FaultLostSuccess: the HTTP status answered (default 503)
	Delay  time.Duration // FaultDelay
}

// Match selects the requests a fault applies to.
type Match func(*http.Request) bool

// MatchAll matches every request.
func MatchAll(*http.Request) bool { return true }

// MatchUploads matches the requests of an upload of the GCS JSON API
// (single-request and resumable: every path under /upload/).
func MatchUploads(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/upload/") }

// MatchUploadOf matches the upload requests whose object name contains
// substr: the name is in the query (resumable uploads, simple media
// uploads) or in the JSON metadata that opens a single-request multipart
// upload's body, which it reads (up to 64 KiB) and puts back.
func MatchUploadOf(substr string) Match {
	return func(r *http.Request) bool {
		if !MatchUploads(r) {
			return false
		}
		if strings.Contains(r.URL.Query().Get("name"), substr) {
			return true
		}
		if r.Body == nil || r.Body == http.NoBody {
			return false
		}
		head := make([]byte, 64<<10)
		n, err := io.ReadFull(r.Body, head)
		head = head[:n]
		rest := r.Body
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), rest), rest}
		_ = err // a short body is all there is
		return bytes.Contains(head, []byte(`"name":"`)) && bytes.Contains(head, []byte(substr))
	}
}

// FaultProxy is an HTTP reverse proxy in front of an object store's HTTP
// endpoint (a GCS emulator such as fake-gcs-server) that injects faults
// into the requests it forwards: error statuses (500, 503, 429), a
// connection reset in the middle of an upload, delays, and a request that
// takes effect while the client is told it failed. It lets a test point
// a real client, or the real server binary, at a store that misbehaves
// the way a real one does on the wire, below the storage client's own
// retries. It is safe for concurrent use.
type FaultProxy struct {
	upstream *url.URL
	ln       net.Listener
	srv      *http.Server
	rp       *httputil.ReverseProxy
	closed   chan struct{}

	mu struct {
		sync.Mutex
		rules    []*faultRule
		requests int
		injected map[FaultKind]int
		log      []string
	}
}

type faultRule struct {
	match Match
	fault Fault
	left  int // requests still to fault; < 0: until cleared
}

// NewFaultProxy listens on a free port of 127.0.0.1 and forwards to
// upstream (scheme and host, e.g. http://127.0.0.1:4443; a path is
// ignored). Close stops it.
func NewFaultProxy(upstream string) (*FaultProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("objstoretest: fault proxy upstream %q: want scheme://host[:port] (%v)", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("objstoretest: fault proxy: %w", err)
	}
	p := &FaultProxy{upstream: &url.URL{Scheme: u.Scheme, Host: u.Host}, ln: ln, closed: make(chan struct{})}
	p.mu.injected = map[FaultKind]int{}
	self := "http://" + ln.Addr().String()
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.upstream)
			// The emulator builds the resumable upload URLs it answers
			// from the Host header: keep ours, so they lead back here.
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			for _, h := range []string{"Location", "X-Goog-Upload-URL"} {
				if v := resp.Header.Get(h); v != "" {
					resp.Header.Set(h, strings.Replace(v, p.upstream.String(), self, 1))
				}
			}
			return nil
		},
		ErrorLog: nil,
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's base URL, http://127.0.0.1:N.
func (p *FaultProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Inject makes the next n requests that match get f (n < 0: every one,
// until Clear). Rules apply in the order injected; a request gets the
// fault of the first rule that matches it and has requests left.
func (p *FaultProxy) Inject(match Match, f Fault, n int) {
	if f.Status == 0 && (f.Kind == FaultStatus || f.Kind == FaultLostSuccess) {
		f.Status = http.StatusServiceUnavailable
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rules = append(p.mu.rules, &faultRule{match: match, fault: f, left: n})
}

// Clear removes every rule: requests are forwarded as they come.
func (p *FaultProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rules = nil
}

// Pending is how many faults the rules with a count still have to inject.
func (p *FaultProxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.mu.rules {
		if r.left > 0 {
			n += r.left
		}
	}
	return n
}

// Injected is how many faults of kind k were injected so far.
func (p *FaultProxy) Injected(k FaultKind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.injected[k]
}

// Requests is how many requests the proxy received.
func (p *FaultProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.requests
}

// Log lists the faults injected, one line each: kind, status, method,
// path and the object's name if the query has it.
func (p *FaultProxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.mu.log...)
}

// Close stops the proxy, cutting the connections it holds.
func (p *FaultProxy) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	return p.srv.Close()
}

// pick returns the fault for r, if any, and counts it. Matches run
// outside the lock (MatchUploadOf reads the body).
func (p *FaultProxy) pick(r *http.Request) (Fault, bool) {
	p.mu.Lock()
	p.mu.requests++
	rules := append([]*faultRule(nil), p.mu.rules...)
	p.mu.Unlock()
	for _, rule := range rules {
		p.mu.Lock()
		left := rule.left
		p.mu.Unlock()
		if left == 0 || !rule.match(r) {
			continue
		}
		p.mu.Lock()
		if rule.left == 0 { // used up meanwhile
			p.mu.Unlock()
			continue
		}
		if rule.left > 0 {
			rule.left--
		}
		p.mu.injected[rule.fault.Kind]++
		line := rule.fault.Kind.String()
		if rule.fault.Status != 0 {
			line += " " + strconv.Itoa(rule.fault.Status)
		}
		line += " " + r.Method + " " + r.URL.Path
		if name := r.URL.Query().Get("name"); name != "" {
			line += " name=" + name
		}
		p.mu.log = append(p.mu.log, line)
		p.mu.Unlock()
		return rule.fault, true
	}
	return Fault{}, false
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	f, ok := p.pick(r)
	if !ok {
		p.rp.ServeHTTP(w, r)
		return
	}
	switch f.Kind {
	case FaultStatus:
		io.Copy(io.Discard, r.Body)
		writeGCSError(w, f.Status, "injected by objstoretest.FaultProxy")
	case FaultReset:
		p.reset(w, r)
	case FaultDelay:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the client gave up
		case <-p.closed:
			return
		}
		p.rp.ServeHTTP(w, r)
	case FaultLostSuccess:
		// The upstream's answer is dropped; the request's effect is not.
		p.rp.ServeHTTP(&discardResponse{h: http.Header{}}, r.WithContext(context.WithoutCancel(r.Context())))
		writeGCSError(w, f.Status, "injected by objstoretest.FaultProxy after the request took effect")
	default:
		p.rp.ServeHTTP(w, r)
	}
}

// reset reads part of the body, then closes the connection with SO_LINGER
// 0, so that the client sees a reset rather than a clean end.
func (p *FaultProxy) reset(w http.ResponseWriter, r *http.Request) {
	n := int64(64 << 10)
	if r.ContentLength > 0 {
		n = min(n, r.ContentLength/2)
	}
	io.CopyN(io.Discard, r.Body, n)
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(errors.New("objstoretest: fault proxy: the response cannot be hijacked"))
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

// writeGCSError answers an error as the GCS JSON API does.
func writeGCSError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"reason":"backendError"}]}}`, code, msg, msg)
}

// discardResponse is a ResponseWriter that drops what it is given.
type discardResponse struct{ h http.Header }

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardResponse) WriteHeader(int)             {}

package egress

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// secretValue is the credential of the tests: a GitHub token's shape.
const secretValue = "ghp_R3alV4lu3Of4T0kenThatMustN0tLeak1234"

// The names the proxies under test reach, and where they are.
var secretHosts = []string{"api.test:10.0.0.1", "other.test:10.0.0.2", "bad.test:10.0.0.3"}

// seenReq is a request an upstream server received.
type seenReq struct {
	server string // "good", "bad" or "plain"
	sni    string
	host   string
	uri    string
	header http.Header
	body   string
}

// carries says where r holds s: a header (Basic decoded), the URI, the body.
func (r seenReq) carries(s string) string {
	var where []string
	for k, vs := range r.header {
		for _, v := range vs {
			if strings.Contains(v, s) {
				where = append(where, "header "+k)
			} else if u, p, ok := basicAuth(k, v); ok && strings.Contains(u+":"+p, s) {
				where = append(where, "header "+k+" (Basic)")
			}
		}
	}
	if strings.Contains(r.uri, s) {
		where = append(where, "URI")
	} else if u, err := url.QueryUnescape(r.uri); err == nil && strings.Contains(u, s) {
		where = append(where, "URI")
	}
	if strings.Contains(r.body, s) {
		where = append(where, "body")
	}
	return strings.Join(where, ", ")
}

// upstreams are the servers behind the proxies: good serves api.test,
// other.test and the address 10.9.9.9 with certificates of ca; bad serves
// bad.test with a certificate of a CA no one trusts; plain is port 80.
type upstreams struct {
	ca               *testCA
	good, bad, plain *httptest.Server
	mu               sync.Mutex
	seen             []seenReq
}

func newUpstreams(t *testing.T) *upstreams {
	t.Helper()
	u := &upstreams{ca: newTestCA(t)}
	handler := func(server string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			s := seenReq{server: server, host: r.Host, uri: r.RequestURI, header: r.Header.Clone(), body: string(body)}
			if r.TLS != nil {
				s.sni = r.TLS.ServerName
			}
			u.mu.Lock()
			u.seen = append(u.seen, s)
			u.mu.Unlock()
			switch r.URL.Path {
			case "/echo", "/echo-gzip":
				// A host that shows what it was sent: an error page, a
				// debugging endpoint, an API that reflects its input.
				w.Header().Set("X-Echo", r.Header.Get("Authorization"))
				var out io.Writer = w
				if r.URL.Path == "/echo-gzip" {
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					defer zw.Close()
					out = zw
				}
				fmt.Fprintf(out, "you sent: %s\n", r.Header.Get("Authorization"))
				if _, p, ok := r.BasicAuth(); ok {
					fmt.Fprintf(out, "password: %s\n", p)
				}
			case "/early":
				w.Header().Set("X-Echo", r.Header.Get("Authorization"))
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("X-Echo")
				io.WriteString(w, "and now the response")
			case "/redirect":
				http.Redirect(w, r, "https://other.test/landing", http.StatusFound)
			default:
				fmt.Fprintf(w, "hello from %s", server)
			}
		}
	}
	start := func(server string, certs tls.Certificate) *httptest.Server {
		s := httptest.NewUnstartedServer(handler(server))
		s.Config.ErrorLog = log.New(io.Discard, "", 0)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{certs}}
		s.EnableHTTP2 = true
		s.StartTLS()
		t.Cleanup(s.Close)
		return s
	}
	u.good = start("good", leafFor(t, u.ca, []string{"api.test", "other.test", "rebind.test"}, []net.IP{net.ParseIP("10.9.9.9")}))
	u.bad = start("bad", leafFor(t, newTestCA(t), []string{"bad.test"}, nil))
	u.plain = httptest.NewServer(handler("plain"))
	t.Cleanup(u.plain.Close)
	return u
}

// leafFor issues a certificate for names and addresses.
func leafFor(t testing.TB, ca *testCA, names []string, ips []net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// dial reaches the upstream server of a vetted address: 10.0.0.3 is bad.test,
// every other address the good server (port 443) or the plain one (80).
func (u *upstreams) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, _ := net.SplitHostPort(addr)
	to := u.plain.Listener.Addr().String()
	if port == "443" {
		to = u.good.Listener.Addr().String()
		if host == "10.0.0.3" {
			to = u.bad.Listener.Addr().String()
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (u *upstreams) mark() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen)
}

func (u *upstreams) since(m int) []seenReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenReq(nil), u.seen[m:]...)
}

// leak describes the first request since m that carried secretValue and
// matches bad; "" when none did.
func (u *upstreams) leak(m int, bad func(seenReq) bool) string {
	for _, r := range u.since(m) {
		if where := r.carries(secretValue); where != "" && (bad == nil || bad(r)) {
			return fmt.Sprintf("the %s server got the value in %s (SNI %q, Host %q, %s)", r.server, where, r.sni, r.host, r.uri)
		}
	}
	return ""
}

// mitm is a proxy under test as the sandbox sees it: where it listens, what
// the sandbox trusts, the placeholder it holds.
type mitm struct {
	proxy       string // host:port of its HTTP proxy
	socks       string // host:port of its SOCKS5 proxy; "" when none
	roots       *x509.CertPool
	placeholder string
	// rebind answers for rebind.test: the good server's address first,
	// the bad one's after.
	rebind *flipResolver
	// records of the proxy (corral's only).
	records func() []Record
}

// client is the sandbox's HTTP client through m, following no redirect.
func (m *mitm) client(h2 bool) *http.Client {
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: m.proxy}),
		TLSClientConfig: &tls.Config{RootCAs: m.roots},
	}
	if h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP2(true)
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// do sends a request with headers and returns the response's status, the
// Authorization-bearing header X-Echo and the body; err on a failure.
func do(c *http.Client, method, u string, body string, hdr ...string) (*http.Response, string, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// corralMITM is corral's proxy with the secret TOKEN bound to api.test and
// bad.test.
func corralMITM(t *testing.T, u *upstreams) (*mitm, *Proxy) {
	t.Helper()
	rebind := &flipResolver{}
	var mu sync.Mutex
	var recs []Record
	p, err := New(Config{
		Allow:         []string{"api.test", "other.test", "bad.test", "rebind.test", "10.9.9.9/32", "10.0.0.0/24"},
		Resolver:      rebind,
		Hosts:         secretHosts,
		Dial:          u.dial,
		UpstreamRoots: u.ca.pool,
		Secrets:       map[string]Secret{"TOKEN": {Value: secretValue, Hosts: []string{"api.test", "bad.test", "rebind.test"}}},
		Record: func(r Record) {
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(u.ca.cert) // the sandbox's system roots
	if !roots.AppendCertsFromPEM(p.CACert()) {
		t.Fatal("the session CA is not PEM")
	}
	m := &mitm{
		proxy:       serveOn(t, p, HTTP),
		socks:       serveOn(t, p, SOCKS),
		roots:       roots,
		placeholder: p.Placeholders()["TOKEN"],
		rebind:      rebind,
		records: func() []Record {
			mu.Lock()
			defer mu.Unlock()
			return append([]Record(nil), recs...)
		},
	}
	return m, p
}

// naivePlaceholder is the naive proxy's placeholder: the same in every
// session, as a vault that names its secrets would have it.
const naivePlaceholder = "ghp_PLACEHOLDERxxxxxxxxxxxxxxxxxxxxxxxxx"

// naiveMITM is a proxy that substitutes naively: it ends the TLS of every
// CONNECT to port 443 with a certificate for whatever name the client asks,
// replaces the placeholder by the value wherever it sees it in a request
// (headers, URL, body; plain HTTP too) for whatever host, sends it on without
// checking the host's certificate, and relays responses as they are. It is
// what each attack below must defeat, to show that the attack tests
// something.
func naiveMITM(t *testing.T, u *upstreams) *mitm {
	t.Helper()
	ca := newTestCA(t)
	rebind := &flipResolver{}
	addrOf := map[string]string{}
	for _, h := range secretHosts {
		name, a, _ := ParseHost(h)
		addrOf[name] = a.String()
	}
	subst := func(s string) string { return strings.ReplaceAll(s, naivePlaceholder, secretValue) }
	forward := func(scheme, connectHost, sni string) *httputil.ReverseProxy {
		return &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme = scheme
				if scheme == "https" {
					pr.Out.URL.Host = connectHost
				}
				pr.Out.Host = pr.In.Host
				for k, vs := range pr.Out.Header {
					for i, v := range vs {
						pr.Out.Header[k][i] = subst(v)
					}
				}
				pr.Out.URL.RawQuery = subst(pr.Out.URL.RawQuery)
				pr.Out.URL.Path = subst(pr.Out.URL.Path)
				if pr.Out.Body != nil {
					b, _ := io.ReadAll(pr.Out.Body)
					nb := subst(string(b))
					pr.Out.Body = io.NopCloser(strings.NewReader(nb))
					pr.Out.ContentLength = int64(len(nb))
				}
			},
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					h, port, _ := net.SplitHostPort(addr)
					if a, ok := addrOf[h]; ok {
						h = a
					} else if as, err := rebind.LookupNetIP(ctx, "ip", h); err == nil {
						h = as[0].String() // looked up again when dialing
					}
					return u.dial(ctx, network, net.JoinHostPort(h, port))
				},
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: sni},
				ForceAttemptHTTP2: true,
			},
			ErrorLog: log.New(io.Discard, "", 0),
		}
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0)}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			forward("http", "", "").ServeHTTP(w, r)
			return
		}
		host, _, _ := net.SplitHostPort(r.Host)
		if _, ok := addrOf[host]; !ok {
			rebind.LookupNetIP(r.Context(), "ip", host) // the check
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		brw.WriteString("HTTP/1.1 200 OK\r\n\r\n")
		brw.Flush()
		var sni string
		tc := tls.Server(&bufferedConn{Conn: c, r: brw.Reader}, &tls.Config{
			NextProtos: []string{"h2", "http/1.1"},
			GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
				sni = hi.ServerName
				var names []string
				var ips []net.IP
				if sni != "" {
					names = []string{sni}
				} else if ip := net.ParseIP(host); ip != nil {
					names, ips = []string{host}, []net.IP{ip}
				} else {
					names = []string{host}
				}
				cert := leafFor(t, ca, names, ips)
				return &cert, nil
			},
		})
		if err := tc.Handshake(); err != nil {
			c.Close()
			return
		}
		inner := &http.Server{Handler: forward("https", r.Host, sni), ErrorLog: log.New(io.Discard, "", 0)}
		_ = inner.Serve(&oneConnListener{c: tc, done: stop})
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(u.ca.cert)
	roots.AddCert(ca.cert)
	return &mitm{proxy: l.Addr().String(), roots: roots, placeholder: naivePlaceholder, rebind: rebind}
}

// flipResolver answers rebind.test with 10.0.0.1 (the good server) the first
// time after reset, with 10.0.0.3 (the bad one) after: DNS rebinding.
type flipResolver struct {
	mu sync.Mutex
	n  int
}

func (r *flipResolver) reset() {
	r.mu.Lock()
	r.n = 0
	r.mu.Unlock()
}

func (r *flipResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host != "rebind.test" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.n == 1 {
		return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("10.0.0.3")}, nil
}

// oneConnListener hands out one connection, then waits until done closes.
type oneConnListener struct {
	c    net.Conn
	done <-chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return pipeAddr{} }

// attack is one way a sandboxed agent tries to get the secret's value, or
// to have it sent where it must not go. It returns how the value escaped,
// or "" when it did not.
type attack struct {
	name string
	// reaches: the request goes on, with the placeholder, through
	// corral's proxy (a request it refuses proves nothing about the
	// secret).
	reaches bool
	run     func(t *testing.T, u *upstreams, m *mitm, other *mitm) string
}

var attacks = []attack{
	{"another allowed host", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		do(m.client(false), "GET", "https://other.test/", "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"plain HTTP to the bound host", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		do(m.client(false), "GET", "http://api.test/", "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"an IP literal", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		do(m.client(false), "GET", "https://10.9.9.9/", "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"SNI not the CONNECT host", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		for _, pair := range [][2]string{{"api.test:443", "other.test"}, {"other.test:443", "api.test"}} {
			rawTLSRequest(t, m, pair[0], pair[1], "GET / HTTP/1.1\r\nHost: "+pair[1]+"\r\nAuthorization: Bearer "+m.placeholder+"\r\nConnection: close\r\n\r\n")
		}
		return u.leak(mk, func(r seenReq) bool { return r.sni != "api.test" || r.host != "api.test" })
	}},
	{"Host header not the SNI (fronting)", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		rawTLSRequest(t, m, "api.test:443", "api.test", "GET / HTTP/1.1\r\nHost: other.test\r\nAuthorization: Bearer "+m.placeholder+"\r\nConnection: close\r\n\r\n")
		return u.leak(mk, nil)
	}},
	{"placeholder in the query and the body", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		do(m.client(false), "POST", "https://api.test/gist?token="+m.placeholder, "content="+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"redirect to another host", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		c := m.client(false)
		resp, _, err := do(c, "GET", "https://api.test/redirect", "", "X-Note", "hello")
		if err != nil || resp.StatusCode != http.StatusFound {
			t.Fatalf("the redirect: %v %v", resp, err)
		}
		// A client that resends its credentials (curl --location-trusted).
		do(c, "GET", resp.Header.Get("Location"), "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"the value echoed back", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		resp, body, err := do(m.client(false), "GET", "https://api.test/echo", "", "Authorization", "Bearer "+m.placeholder)
		if err != nil {
			t.Fatalf("echo: %v", err)
		}
		if strings.Contains(body, secretValue) || strings.Contains(resp.Header.Get("X-Echo"), secretValue) {
			return "the response showed the value: " + strings.TrimSpace(body)
		}
		if !strings.Contains(body, m.placeholder) {
			t.Fatalf("the echo lost its placeholder too: %q", body)
		}
		return ""
	}},
	{"the value echoed back compressed", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		req, _ := http.NewRequest("GET", "https://api.test/echo-gzip", nil)
		req.Header.Set("Authorization", "Bearer "+m.placeholder)
		req.Header.Set("Accept-Encoding", "gzip") // read raw, decoded here
		resp, err := m.client(false).Do(req)
		if err != nil {
			t.Fatalf("echo: %v", err)
		}
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		b, _ := io.ReadAll(r)
		shown := string(b) + resp.Header.Get("X-Echo")
		for _, line := range strings.Split(string(b), "\n") {
			if _, p, ok := basicAuth("Authorization", strings.TrimPrefix(line, "you sent: ")); ok {
				shown += "\n" + p
			}
		}
		if strings.Contains(shown, secretValue) {
			return "the response showed the value"
		}
		return ""
	}},
	{"the value echoed in 103 Early Hints", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		var early []string
		req, _ := http.NewRequest("GET", "https://api.test/early", nil)
		req.Header.Set("Authorization", "Bearer "+m.placeholder)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				early = append(early, fmt.Sprint(code, h))
				return nil
			},
		}))
		resp, err := m.client(false).Do(req)
		if err != nil {
			t.Fatalf("early hints: %v", err)
		}
		resp.Body.Close()
		if len(early) == 0 {
			t.Fatal("no 103 came through")
		}
		if s := strings.Join(early, " "); strings.Contains(s, secretValue) {
			return "a 103 showed the value: " + s
		}
		return ""
	}},
	{"the host's certificate not trusted", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		do(m.client(false), "GET", "https://bad.test/", "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, nil)
	}},
	{"another session's placeholder", true, func(t *testing.T, u *upstreams, m, other *mitm) string {
		mk := u.mark()
		do(m.client(false), "GET", "https://api.test/", "", "Authorization", "Bearer "+other.placeholder)
		return u.leak(mk, nil)
	}},
	{"DNS rebinding between check and dial", false, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		m.rebind.reset()
		mk := u.mark()
		do(m.client(false), "GET", "https://rebind.test/", "", "Authorization", "Bearer "+m.placeholder)
		return u.leak(mk, func(r seenReq) bool { return r.server != "good" })
	}},
	{"HTTP/1.1 keep-alive, then another Host", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		reuse(t, m, false)
		return u.leak(mk, func(r seenReq) bool { return r.host != "api.test" })
	}},
	{"HTTP/2 connection reused for another authority", true, func(t *testing.T, u *upstreams, m, _ *mitm) string {
		mk := u.mark()
		reuse(t, m, true)
		return u.leak(mk, func(r seenReq) bool { return r.host != "api.test" })
	}},
}

// rawTLSRequest opens CONNECT target through m, says sni in its ClientHello
// (trusting anything), sends req and reads what comes back.
func rawTLSRequest(t *testing.T, m *mitm, target, sni, req string) {
	t.Helper()
	c, err := net.Dial("tcp", m.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		return
	}
	tc := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		return
	}
	io.WriteString(tc, req)
	io.ReadAll(tc)
}

// reuse sends, on one connection to api.test through m, a request for
// api.test and then one for other.test with the placeholder.
func reuse(t *testing.T, m *mitm, h2 bool) {
	t.Helper()
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: m.proxy}),
		TLSClientConfig: &tls.Config{RootCAs: m.roots},
		Protocols:       new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(!h2)
	tr.Protocols.SetHTTP2(h2)
	cc, err := tr.NewClientConn(context.Background(), "https", "api.test:443")
	if err != nil {
		t.Fatalf("a connection to api.test: %v", err)
	}
	defer cc.Close()
	for _, u := range []string{"https://api.test/", "https://other.test/"} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+m.placeholder)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Logf("%s: %v", u, err)
			continue
		}
		if h2 && resp.ProtoMajor != 2 {
			t.Fatalf("not HTTP/2: %s", resp.Proto)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestSecretAttacks runs each attack against corral's proxy, where the value
// must not escape, and against a naive substituting proxy, where it must:
// the attack would catch a proxy that did not check what it checks.
func TestSecretAttacks(t *testing.T) {
	u := newUpstreams(t)
	corral, _ := corralMITM(t, u)
	corralOther, _ := corralMITM(t, u) // another session
	naive := naiveMITM(t, u)
	naiveOther := naiveMITM(t, u)
	if corral.placeholder == corralOther.placeholder || corral.placeholder == secretValue {
		t.Fatalf("placeholders: %q %q", corral.placeholder, corralOther.placeholder)
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			mk := u.mark()
			if leak := a.run(t, u, corral, corralOther); leak != "" {
				t.Errorf("corral's proxy: %s", leak)
			}
			if a.reaches {
				var carried bool
				for _, r := range u.since(mk) {
					carried = carried || r.carries(corral.placeholder) != "" || r.carries(corralOther.placeholder) != ""
				}
				if !carried {
					t.Errorf("corral's proxy sent no request with the placeholder: %+v", u.since(mk))
				}
			}
			if leak := a.run(t, u, naive, naiveOther); leak == "" {
				t.Errorf("the naive proxy did not leak: the attack tests nothing")
			} else {
				t.Logf("the naive proxy: %s", leak)
			}
		})
	}
	if len(attacks) < 12 {
		t.Fatalf("%d attacks", len(attacks))
	}
	// What the sandbox is told: the refusals and withheld secrets corral's
	// proxy could see.
	want := map[string]bool{
		"plain HTTP":       false,
		"not api.test":     false, // fronting
		"in the URL":       false,
		"not trusted":      false,
		"TLS server name":  false,
		"other.test, not ": false,
	}
	for _, r := range corral.records() {
		for k := range want {
			if strings.Contains(r.Reason, k) {
				want[k] = true
			}
		}
		for _, s := range r.Secrets {
			if s != "TOKEN" {
				t.Errorf("a record names %q", s)
			}
		}
	}
	for k, ok := range want {
		if !ok {
			t.Errorf("no record says %q; records:\n%s", k, recordLines(corral.records()))
		}
	}
}

func recordLines(rs []Record) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s %s %s %v %q\n", r.Proto, r.Target(), r.Verdict, r.Secrets, r.Reason)
	}
	return b.String()
}

// TestSecretPutIn: the value goes into the headers of requests to the bound
// host over HTTP/1.1 and HTTP/2, through CONNECT and SOCKS, Basic included,
// and the upstream sees it there and nowhere else; a naive proxy that
// replaces text does not handle Basic.
func TestSecretPutIn(t *testing.T) {
	u := newUpstreams(t)
	m, _ := corralMITM(t, u)
	for _, h2 := range []bool{false, true} {
		mk := u.mark()
		resp, body, err := do(m.client(h2), "GET", "https://API.test./repos", "", "Authorization", "token "+m.placeholder, "X-Other", "a"+m.placeholder+"b")
		if err != nil || resp.StatusCode != 200 || body != "hello from good" {
			t.Fatalf("h2=%v: %v %v %q", h2, resp, err, body)
		}
		if h2 != (resp.ProtoMajor == 2) {
			t.Fatalf("h2=%v: %s", h2, resp.Proto)
		}
		seen := u.since(mk)
		if len(seen) != 1 || seen[0].header.Get("Authorization") != "token "+secretValue ||
			seen[0].header.Get("X-Other") != "a"+secretValue+"b" || seen[0].sni != "api.test" {
			t.Fatalf("h2=%v: the upstream saw %+v", h2, seen)
		}
	}
	// Basic, as git and curl send a token in a URL's user information.
	for _, proxy := range []*mitm{m, naiveMITM(t, u)} {
		mk := u.mark()
		req, _ := http.NewRequest("GET", "https://api.test/info/refs", nil)
		req.SetBasicAuth("x-access-token", proxy.placeholder)
		resp, err := proxy.client(false).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		seen := u.since(mk)
		ok := len(seen) == 1 && seen[0].carries(secretValue) == "header Authorization (Basic)"
		if proxy == m && !ok {
			t.Fatalf("Basic: the upstream saw %+v", seen)
		}
		if proxy != m && ok {
			t.Fatal("the naive proxy handled Basic")
		}
	}
	// The Basic form echoed back is masked too, encoded or decoded.
	req, _ := http.NewRequest("GET", "https://api.test/echo", nil)
	req.SetBasicAuth("x-access-token", m.placeholder)
	resp, err := m.client(false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantEcho := "you sent: " + req.Header.Get("Authorization") + "\npassword: " + m.placeholder + "\n"
	if string(b) != wantEcho || resp.Header.Get("X-Echo") != req.Header.Get("Authorization") {
		t.Fatalf("Basic echoed: %q, X-Echo %q; want %q", b, resp.Header.Get("X-Echo"), wantEcho)
	}
	// A response without a body passes whatever its encoding.
	if resp, _, err := do(m.client(false), "HEAD", "https://api.test/echo-gzip", ""); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD of a gzip body: %v %v", resp, err)
	}
	// Through SOCKS.
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "socks5h", Host: m.socks}),
		TLSClientConfig: &tls.Config{RootCAs: m.roots},
	}
	defer tr.CloseIdleConnections()
	mk := u.mark()
	resp, _, err = do(&http.Client{Transport: tr, Timeout: 10 * time.Second}, "GET", "https://api.test/", "", "Authorization", "Bearer "+m.placeholder)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("SOCKS: %v %v", resp, err)
	}
	if seen := u.since(mk); len(seen) != 1 || seen[0].header.Get("Authorization") != "Bearer "+secretValue {
		t.Fatalf("SOCKS: the upstream saw %+v", seen)
	}
	// The connections' records name the secret, never its value.
	var intercepted int
	for _, r := range m.records() {
		if r.Intercepted && r.Verdict == Allowed && len(r.Secrets) == 1 && r.Secrets[0] == "TOKEN" {
			intercepted++
		}
		if strings.Contains(fmt.Sprintf("%+v", r), secretValue) {
			t.Fatalf("a record holds the value: %+v", r)
		}
	}
	if intercepted == 0 {
		t.Fatalf("no record of an interception:\n%s", recordLines(m.records()))
	}
}

// TestSecretsNotInterceptedElsewhere: a host bound to no secret keeps its
// tunnel, the certificate the client sees is the host's own.
func TestSecretsNotInterceptedElsewhere(t *testing.T) {
	u := newUpstreams(t)
	m, _ := corralMITM(t, u)
	roots := x509.NewCertPool()
	roots.AddCert(u.ca.cert) // the host's CA only: corral's would not do
	c := m.client(false)
	c.Transport.(*http.Transport).TLSClientConfig.RootCAs = roots
	resp, _, err := do(c, "GET", "https://other.test/", "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("other.test: %v %v", resp, err)
	}
	if _, _, err := do(c, "GET", "https://api.test/", ""); err == nil {
		t.Fatal("api.test was not intercepted: the host's own certificate passed")
	}
}

func TestPlaceholder(t *testing.T) {
	for _, v := range []string{secretValue, "glpat-abcDEF0123456789xyzw", "sk-proj-AbC_123-xyz.ZZZ9", "plainlowercasesecret", "AKIAIOSFODNN7EXAMPLE"} {
		p := Placeholder(v)
		if len(p) != len(v) || p == v {
			t.Fatalf("%q → %q", v, p)
		}
		for _, pre := range []string{"ghp_", "glpat-", "sk-proj-", "AKIA"} {
			if strings.HasPrefix(v, pre) && !strings.HasPrefix(p, pre) {
				t.Fatalf("%q → %q lost its prefix", v, p)
			}
		}
		for i := 0; i < len(v); i++ {
			if class(v[i]) != class(p[i]) {
				t.Fatalf("%q → %q: position %d changed class", v, p, i)
			}
		}
		if Placeholder(v) == p {
			t.Fatalf("%q: the same placeholder twice", v)
		}
	}
}

func class(c byte) string {
	switch {
	case c >= 'a' && c <= 'z':
		return "lower"
	case c >= 'A' && c <= 'Z':
		return "upper"
	case c >= '0' && c <= '9':
		return "digit"
	}
	return string(c)
}

func TestSecretSettings(t *testing.T) {
	ok := Secret{Value: secretValue, Hosts: []string{"api.test"}}
	cases := map[string]Config{
		"short":    {Secrets: map[string]Secret{"T": {Value: "abc", Hosts: []string{"a.test"}}}},
		"newline":  {Secrets: map[string]Secret{"T": {Value: secretValue + "\n", Hosts: []string{"a.test"}}}},
		"no host":  {Secrets: map[string]Secret{"T": {Value: secretValue}}},
		"address":  {Secrets: map[string]Secret{"T": {Value: secretValue, Hosts: []string{"10.0.0.1"}}}},
		"wildcard": {Secrets: map[string]Secret{"T": {Value: secretValue, Hosts: []string{"*.api.test"}}}},
		"port":     {Secrets: map[string]Secret{"T": {Value: secretValue, Hosts: []string{"api.test:8443"}}}},
		"name":     {Secrets: map[string]Secret{"1T": ok}},
		"denied":   {Deny: []string{"api.test"}, Secrets: map[string]Secret{"T": ok}},
		"weak":     {Secrets: map[string]Secret{"T": {Value: "ghp_------------ab", Hosts: []string{"a.test"}}}},
	}
	for name, cfg := range cases {
		if p, err := New(cfg); err == nil {
			p.Close()
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	p, err := New(Config{Secrets: map[string]Secret{"T": ok}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.CACert() == nil || len(p.Placeholders()["T"]) != len(secretValue) {
		t.Fatal("no CA or placeholder")
	}
}

// TestMaskReader: values are masked whatever the boundaries of the reads.
func TestMaskReader(t *testing.T) {
	pairs := [][2]string{{"SECRETVALUE1", "placeholder1"}, {"xyzzy-other", "plugh-other"}}
	text := strings.Repeat("a", 100) + "SECRETVALUE1" + "SECRETVALUE1SECRETVALUE1 b xyzzy-otherSECRETVALUE1" + strings.Repeat("c", 7) + "SECRETVALU"
	want := text
	for _, p := range pairs {
		want = strings.ReplaceAll(want, p[0], p[1])
	}
	for size := 1; size <= len(text); size++ {
		r := newMaskReader(io.NopCloser(&chunked{data: []byte(text), size: size}), pairs)
		got, err := io.ReadAll(r)
		if err != nil || string(got) != want {
			t.Fatalf("chunks of %d: %q %v", size, got, err)
		}
	}
}

// chunked reads in pieces of size.
type chunked struct {
	data []byte
	size int
}

func (c *chunked) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}

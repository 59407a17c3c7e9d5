package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// benchSetup is a proxy with a secret bound to api.test, and other.test
// tunnelled as any host is: the same HTTPS server behind both.
func benchSetup(b *testing.B) (*Proxy, string, *x509.CertPool) {
	b.Helper()
	ca := newTestCA(b)
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("mb"))
		if n == 0 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n<<20))
		for range n {
			w.Write(chunk)
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(b, "api.test", "other.test")}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(srv.Close)
	p, err := New(Config{
		Allow:         []string{"api.test", "other.test"},
		Hosts:         []string{"api.test:10.0.0.1", "other.test:10.0.0.2"},
		UpstreamRoots: ca.pool,
		Secrets:       map[string]Secret{"TOKEN": {Value: secretValue, Hosts: []string{"api.test"}}},
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go p.Serve(l, HTTP)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	roots.AppendCertsFromPEM(p.CACert())
	return p, l.Addr().String(), roots
}

func benchClient(proxy string, roots *x509.CertPool, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: proxy}),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: !keepAlive,
	}}
}

// BenchmarkSecretRequest: one small request through a tunnel (other.test)
// and through interception (api.test, the secret put in), on a new
// connection each time and on a connection kept alive.
func BenchmarkSecretRequest(b *testing.B) {
	p, proxy, roots := benchSetup(b)
	ph := p.Placeholders()["TOKEN"]
	for _, keep := range []bool{false, true} {
		for _, host := range []string{"other.test", "api.test"} {
			name := map[string]string{"other.test": "tunnel", "api.test": "intercept"}[host]
			conn := map[bool]string{false: "new-conn", true: "keep-alive"}[keep]
			b.Run(conn+"/"+name, func(b *testing.B) {
				c := benchClient(proxy, roots, keep)
				defer c.CloseIdleConnections()
				req, _ := http.NewRequest("GET", "https://"+host+"/", nil)
				req.Header.Set("Authorization", "Bearer "+ph)
				for b.Loop() {
					resp, err := c.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
}

// BenchmarkSecretDownload: 100 MB through a tunnel and through
// interception, where the body is searched for the value as it streams.
func BenchmarkSecretDownload(b *testing.B) {
	_, proxy, roots := benchSetup(b)
	const mb = 100
	for _, host := range []string{"other.test", "api.test"} {
		name := map[string]string{"other.test": "tunnel", "api.test": "intercept"}[host]
		b.Run(fmt.Sprintf("%dMB/%s", mb, name), func(b *testing.B) {
			c := benchClient(proxy, roots, true)
			defer c.CloseIdleConnections()
			b.SetBytes(mb << 20)
			for b.Loop() {
				resp, err := c.Get(fmt.Sprintf("https://%s/?mb=%d", host, mb))
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != mb<<20 {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}

// BenchmarkSecretRatio alternates tunnel and interception in every
// iteration, so that both meet the same load of the machine, and reports
// each one's time and their ratio: a small request on a connection kept
// alive, one on a new connection, and a 100 MB download.
func BenchmarkSecretRatio(b *testing.B) {
	p, proxy, roots := benchSetup(b)
	ph := p.Placeholders()["TOKEN"]
	for _, c := range []struct {
		name string
		keep bool
		mb   int
	}{{"request/keep-alive", true, 0}, {"request/new-conn", false, 0}, {"download/100MB", true, 100}} {
		b.Run(c.name, func(b *testing.B) {
			clients := map[string]*http.Client{"other.test": benchClient(proxy, roots, c.keep), "api.test": benchClient(proxy, roots, c.keep)}
			var spent [2]time.Duration
			for b.Loop() {
				for i, host := range []string{"other.test", "api.test"} {
					req, _ := http.NewRequest("GET", fmt.Sprintf("https://%s/?mb=%d", host, c.mb), nil)
					req.Header.Set("Authorization", "Bearer "+ph)
					start := time.Now()
					resp, err := clients[host].Do(req)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					spent[i] += time.Since(start)
					if n != int64(c.mb<<20) && c.mb > 0 {
						b.Fatalf("%d bytes", n)
					}
				}
			}
			for _, cl := range clients {
				cl.CloseIdleConnections()
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "tunnel-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "intercept-ns/op")
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
		})
	}
}

package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// plainSpellings are plain HTTP requests as a client hostile to the Host
// check may spell them: servers read each as a request.
var plainSpellings = map[string]string{
	"upper":       "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"lower":       "get / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"long-method": "PROPFIND / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"empty-line":  "\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"crlf-crlf":   "\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"tab":         "GET\t/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	"garbage":     "hello, is anyone there\r\n",
}

// webFixture is a fixture whose proxy dials port 443 of every host at its
// TLS server and port 80 at its plain one, so that tunnels to the web's
// ports reach servers that would answer.
func webFixture(t *testing.T, allow ...string) *fixture {
	var f *fixture
	f = newFixture(t, Config{Allow: allow, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		switch port {
		case "443":
			addr = f.tlsSrv.Listener.Addr().String()
		case "80":
			addr = f.httpSrv.Listener.Addr().String()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	return f
}

// TestTunnelMustCarryTLS: a tunnel to a host a name-only rule allows (the
// web's ports, 443 and 80) carries TLS and nothing else: plain HTTP in every
// spelling, and any other bytes, are refused before they reach the host,
// through CONNECT and SOCKS alike; a TLS ClientHello for the host passes.
func TestTunnelMustCarryTLS(t *testing.T) {
	f := webFixture(t, "allowed.test")
	for _, port := range []int{443, 80} {
		for name, req := range plainSpellings {
			for _, via := range []string{"connect", "socks"} {
				t.Run(fmt.Sprintf("%d/%s/%s", port, via, name), func(t *testing.T) {
					m := f.mark()
					var c net.Conn
					var br *bufio.Reader
					if via == "connect" {
						var code int
						code, _, c, br = rawConnect(t, f.httpProxy, fmt.Sprintf("allowed.test:%d", port))
						if code != 200 {
							t.Fatalf("CONNECT: %d", code)
						}
					} else {
						var rep byte
						rep, c = socksDial(t, f.socks, "allowed.test", port, 1)
						if rep != 0 {
							t.Fatalf("SOCKS reply %d", rep)
						}
						br = bufio.NewReader(c)
					}
					io.WriteString(c, req)
					c.SetDeadline(time.Now().Add(5 * time.Second))
					if b, _ := io.ReadAll(br); len(b) != 0 {
						t.Fatalf("the host answered through the tunnel: %.80q", b)
					}
					r := f.lastRecord(t, "allowed.test", m)
					if r.Verdict != Denied || !strings.Contains(r.Reason, "not TLS") || r.BytesOut != 0 {
						t.Fatalf("record %+v", r)
					}
				})
			}
		}
	}
	// TLS for the host passes.
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			_, _, c, _ := rawConnect(t, f.httpProxy, "allowed.test:443")
			return c, nil
		},
		TLSClientConfig: &tls.Config{RootCAs: f.ca.pool},
	}
	defer tr.CloseIdleConnections()
	code, body := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "https://allowed.test/x")
	if code != 200 || body != "tls hello from allowed.test" {
		t.Fatalf("TLS through the tunnel: %d %q", code, body)
	}
}

// TestTunnelRawPort: a rule that names the port itself allows any protocol
// on it (ssh over 443); plain HTTP, in the spellings that arrive whole, is
// still refused on a port that is not the web's.
func TestTunnelRawPort(t *testing.T) {
	f := webFixture(t, "allowed.test:443", "allowed.test:*")
	m := f.mark()
	code, _, c, br := rawConnect(t, f.httpProxy, "allowed.test:443")
	if code != 200 {
		t.Fatalf("CONNECT: %d", code)
	}
	io.WriteString(c, "SSH-2.0-client\r\n")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(br) // the TLS server hangs up on what is not TLS
	c.Close()
	if r := f.lastRecord(t, "allowed.test", m); r.Verdict != Allowed || r.BytesOut != int64(len("SSH-2.0-client\r\n")) {
		t.Fatalf("raw bytes to a port the rule names: record %+v", r)
	}
	for name, req := range plainSpellings {
		if name == "garbage" {
			continue
		}
		m := f.mark()
		code, _, c, br := rawConnect(t, f.httpProxy, fmt.Sprintf("allowed.test:%d", f.httpPort))
		if code != 200 {
			t.Fatalf("CONNECT: %d", code)
		}
		io.WriteString(c, req)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if b, _ := io.ReadAll(br); len(b) != 0 {
			t.Fatalf("%s: plain HTTP went through a tunnel: %.80q", name, b)
		}
		if r := f.lastRecord(t, "allowed.test", m); r.Verdict != Denied || !strings.Contains(r.Reason, "plain HTTP") {
			t.Fatalf("%s: record %+v", name, r)
		}
	}
}

package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// needsTLS says whether a tunnel to port, allowed by d, must begin with a TLS
// ClientHello: the web's ports (what a pattern without a port admits), unless
// an allow pattern names the port itself and so allows any protocol on it.
func needsTLS(port int, d decision) bool {
	return (port == 443 || port == 80) && !d.raw
}

// tunnel splices a client and the host dialed for it, once the client's first
// bytes passed inspection. host is the name (or address) the tunnel was opened
// for; tls, whether the tunnel must carry TLS. It closes both connections and
// finishes rec.
func (p *Proxy) tunnel(client net.Conn, up net.Conn, host string, tls bool, rec *entry) {
	defer p.finish(rec)
	if !p.track(up) {
		client.Close()
		up.Close()
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Add(1)
	// The host may speak first (ssh, smtp): its bytes flow at once. TLS
	// servers say nothing before the ClientHello.
	go func() {
		defer wg.Done()
		// Written to the socket itself, not through its wrappers, so that
		// the kernel can splice one socket into the other.
		n, _ := io.Copy(bare(client), up)
		rec.in.Add(n)
		closeWrite(client)
	}()
	br := bufio.NewReaderSize(client, 4096)
	first, reason := inspect(br, host, tls)
	if reason != "" {
		rec.deny(reason)
		client.Close()
		up.Close()
		wg.Wait()
		return
	}
	if len(first) > 0 {
		n, err := up.Write(first)
		rec.out.Add(int64(n))
		if err != nil {
			client.Close()
			up.Close()
			wg.Wait()
			return
		}
	}
	n, _ := br.WriteTo(up)
	rec.out.Add(n)
	closeWrite(up)
	wg.Wait()
	client.Close()
	up.Close()
}

// inspect reads a tunnel's first bytes from the client and decides whether
// they may go on: a TLS ClientHello must name host (no name at all when host
// is an address); when tls is set nothing else may go (whatever the spelling
// of a plain HTTP request, it is not a TLS record); otherwise plain HTTP must
// use the proxy in absolute form instead, so that its Host header is judged,
// and other bytes go on. It returns the bytes it consumed.
func inspect(br *bufio.Reader, host string, tls bool) ([]byte, string) {
	b, err := br.Peek(1)
	if err != nil {
		return nil, "" // the client closed without a word: nothing to judge
	}
	if b[0] != 0x16 { // not a TLS handshake record
		if tls {
			return nil, "not TLS in a tunnel to an https port; send plain http to the proxy as an http:// request, or allow the port itself (host:port) for another protocol"
		}
		// What has come so far: a client that speaks first and waits
		// (a database's greeting) must not be kept waiting for more.
		head, _ := br.Peek(min(br.Buffered(), 64))
		if looksLikeHTTP(head) {
			return nil, "plain HTTP inside a tunnel; send it to the proxy as an http:// request"
		}
		return nil, ""
	}
	var seen bytes.Buffer
	sni, ok := readServerName(io.TeeReader(io.LimitReader(br, 1<<17), &seen))
	if !ok {
		return nil, "not a TLS ClientHello"
	}
	want := strings.ToLower(strings.TrimSuffix(host, "."))
	got := strings.ToLower(strings.TrimSuffix(sni, "."))
	switch {
	case got == want:
	case got == "" && isAddr(host):
	case got == "":
		return nil, fmt.Sprintf("TLS without a server name in a tunnel to %s", host)
	default:
		return nil, fmt.Sprintf("TLS server name %s does not match the CONNECT host %s", sni, host)
	}
	return seen.Bytes(), ""
}

func isAddr(host string) bool {
	return net.ParseIP(strings.Trim(host, "[]")) != nil
}

// looksLikeHTTP says whether b starts like an HTTP request line, as lenient
// servers read one: empty lines first, then a method of token characters in
// any case, then a space or a tab.
func looksLikeHTTP(b []byte) bool {
	b = bytes.TrimLeft(b, "\r\n")
	i := bytes.IndexAny(b, " \t")
	if i < 1 {
		return false
	}
	for _, c := range b[:i] {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// errHelloRead stops the TLS handshake once the ClientHello was read.
var errHelloRead = errors.New("client hello read")

// readServerName reads one ClientHello from r with crypto/tls's own parser and
// returns its server name; ok is false when r did not carry a ClientHello.
func readServerName(r io.Reader) (string, bool) {
	var sni string
	var got bool
	conn := tls.Server(helloConn{r: r}, &tls.Config{
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, got = hi.ServerName, true
			return nil, errHelloRead
		},
	})
	_ = conn.Handshake()
	return sni, got
}

// helloConn is a read-only net.Conn for readServerName; what the TLS server
// would write (an alert) is dropped.
type helloConn struct {
	net.Conn
	r io.Reader
}

func (c helloConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c helloConn) Write(b []byte) (int, error) { return len(b), nil }
func (c helloConn) Close() error                { return nil }
func (c helloConn) LocalAddr() net.Addr         { return pipeAddr{} }
func (c helloConn) RemoteAddr() net.Addr        { return pipeAddr{} }

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *bufferedConn) CloseWrite() error { return closeWrite(c.Conn) }

// bare returns the connection under the proxy's wrappers, for writing.
func bare(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case *bufferedConn:
			c = w.Conn
		case *closeNotifyConn:
			c = w.Conn
		default:
			return c
		}
	}
}

// closeWrite half-closes a connection where it can, else leaves it.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *closeNotifyConn) CloseWrite() error { return closeWrite(c.Conn) }

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

// tunnel splices a client and the host dialed for it, once the client's first
// bytes passed inspection. host is the name (or address) the tunnel was opened
// for. It closes both connections and finishes rec.
func (p *Proxy) tunnel(client net.Conn, up net.Conn, host string, rec *entry) {
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
	first, reason := inspect(br, host)
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
// is an address); plain HTTP must use the proxy in absolute form instead, so
// that its Host header is judged. It returns the bytes it consumed.
func inspect(br *bufio.Reader, host string) ([]byte, string) {
	b, err := br.Peek(1)
	if err != nil {
		return nil, "" // the client closed without a word: nothing to judge
	}
	if b[0] != 0x16 { // not a TLS handshake record
		head, _ := br.Peek(8)
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

// looksLikeHTTP says whether b starts like an HTTP request line.
func looksLikeHTTP(b []byte) bool {
	i := bytes.IndexByte(b, ' ')
	if i < 3 {
		return false
	}
	for _, c := range b[:i] {
		if c < 'A' || c > 'Z' {
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

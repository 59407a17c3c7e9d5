package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Connect is a command's way through the egress proxy for a program that
// takes a command to connect with, as ssh's ProxyCommand (`corral agent
// connect PROXY HOST PORT`): it asks the HTTP proxy at proxy for a tunnel to
// host:port, then copies in to the tunnel and the tunnel to out until the far
// end closes. A refusal is an error with the proxy's one-line reason. It runs
// as the command's user, not as the agent.
func Connect(ctx context.Context, proxy, host, port string, in io.Reader, out io.Writer) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		return fmt.Errorf("no egress proxy at %s: %w", proxy, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	target := net.JoinHostPort(host, port)
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		if msg = strings.TrimPrefix(msg, "corral: "); msg == "" {
			msg = "the egress proxy answered " + resp.Status
		}
		return errors.New(msg)
	}
	go func() {
		_, _ = io.Copy(c, in)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	if _, err := io.Copy(out, br); err != nil && ctx.Err() == nil {
		return fmt.Errorf("tunnel to %s: %w", target, err)
	}
	return nil
}

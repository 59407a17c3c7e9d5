// Package httpserve is the front hall of corral's HTTP servers — the MCP
// server (corral mcp --http), the control API (corral serve --http) and the
// web view (--ui, corral ui): listening, the bearer token, the checks against
// DNS rebinding and cross-origin requests, timeouts and shutdown, written
// once.
package httpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// TokenEnv is the environment variable a token comes from when no
// --auth-token is given.
const TokenEnv = "CORRAL_AUTH_TOKEN"

// Token is flag, or $CORRAL_AUTH_TOKEN when flag is empty.
func Token(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(TokenEnv)
}

// ListenOptions describe a front end's address flag, for Listen's checks and
// messages.
type ListenOptions struct {
	// Flag names the address flag in messages, e.g. "--http".
	Flag string
	// Example is a good address, e.g. "127.0.0.1:8767".
	Example string
	// DefaultHost replaces an empty host (":8766"); with none, an empty host
	// is every address, which needs a token.
	DefaultHost string
	// Why says what a token keeps from others, e.g. "so that only your
	// clients can run commands".
	Why string
}

// Listen listens on the TCP address addr (HOST:PORT). An address beyond
// loopback is refused without a token: whoever reaches it could act for the
// user.
func Listen(addr, token string, o ListenOptions) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: want HOST:PORT, e.g. %s", o.Flag, addr, o.Example)
	}
	if host == "" {
		host = o.DefaultHost
	}
	if !IsLoopback(host) && token == "" {
		return nil, fmt.Errorf("%s %s listens beyond this machine: give --auth-token (or $%s) %s, or listen on 127.0.0.1", o.Flag, addr, TokenEnv, o.Why)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Flag, err)
	}
	return ln, nil
}

// IsLoopback reports whether host (no port; an IPv6 address without
// brackets) is "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoopbackHost reports whether a Host header (host, host:port, [v6]:port)
// names this machine by "localhost" or a loopback address. Other names, even
// ones that resolve to loopback, are what DNS rebinding sends.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return IsLoopback(host)
}

// Equal reports whether a and b are the same, in time that depends on
// neither their bytes nor their lengths: both are hashed first.
func Equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// Bearer reports whether r carries "Authorization: Bearer token".
func Bearer(r *http.Request, token string) bool {
	return Equal(r.Header.Get("Authorization"), "Bearer "+token)
}

// Refusal is why Guard refused a request.
type Refusal int

const (
	// WrongHost: without a token, the Host header is not a loopback name.
	WrongHost Refusal = iota + 1
	// NoToken: the token is missing or wrong.
	NoToken
	// CrossOrigin: a request that changes something comes from a page of
	// another origin.
	CrossOrigin
)

// Guard checks every request before a front end sees it:
//
//   - without a token, the Host header must name loopback ("localhost",
//     127.0.0.1, [::1]), so that a page whose name rebinds to 127.0.0.1
//     cannot reach the server;
//   - with one, the request must carry it as "Authorization: Bearer TOKEN"
//     (or as the cookie, when Cookie is set);
//   - a request other than GET or HEAD with an Origin header must come from
//     the server's own origin.
type Guard struct {
	// Token is the bearer token; empty: none, and loopback names only.
	Token string
	// Cookie, when set, names a cookie that may carry the token instead: a
	// GET with ?token=TOKEN sets it (HttpOnly, SameSite=Strict) and is sent
	// on to the same address without the token, so that a browser can
	// open the page once with the token in its address.
	Cookie string
	// Deny answers a refused request; WWW-Authenticate is set for NoToken.
	// Nil: plain text, 403 (401 for NoToken).
	Deny func(w http.ResponseWriter, r *http.Request, why Refusal)
}

// Wrap returns next behind the guard.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch why := g.check(w, r); why {
		case 0:
			next.ServeHTTP(w, r)
		case answered:
		default:
			if why == NoToken {
				w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
			}
			g.deny(w, r, why)
		}
	})
}

// answered: check answered the request itself (the ?token= visit).
const answered Refusal = -1

// check is 0 when r may pass, or why not.
func (g Guard) check(w http.ResponseWriter, r *http.Request) Refusal {
	if g.Token == "" {
		if !LoopbackHost(r.Host) {
			return WrongHost
		}
	} else {
		if g.Cookie != "" && r.Method == http.MethodGet {
			if t := r.URL.Query().Get("token"); t != "" && Equal(t, g.Token) {
				http.SetCookie(w, &http.Cookie{Name: g.Cookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q := r.URL.Query()
				q.Del("token")
				u := *r.URL
				u.RawQuery = q.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return answered
			}
		}
		if !g.authorized(r) {
			return NoToken
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				return CrossOrigin
			}
		}
	}
	return 0
}

func (g Guard) authorized(r *http.Request) bool {
	if Bearer(r, g.Token) {
		return true
	}
	if g.Cookie == "" {
		return false
	}
	c, err := r.Cookie(g.Cookie)
	return err == nil && Equal(c.Value, g.Token)
}

func (g Guard) deny(w http.ResponseWriter, r *http.Request, why Refusal) {
	if g.Deny != nil {
		g.Deny(w, r, why)
		return
	}
	switch why {
	case WrongHost:
		http.Error(w, fmt.Sprintf("host %q is not a loopback name: without --auth-token the server answers only to localhost, 127.0.0.1 or [::1]", r.Host), http.StatusForbidden)
	case NoToken:
		http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
	default:
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}
}

// ReadHeaderTimeout bounds how long a client may take to send a request's
// headers.
const ReadHeaderTimeout = 10 * time.Second

// ServeOptions configure Serve.
type ServeOptions struct {
	// Drain is how long the shutdown waits for requests in flight; zero
	// closes every connection at once (for responses that never end on
	// their own, such as event streams).
	Drain time.Duration
	// OnStop, when set, runs when serving ends, before the shutdown.
	OnStop func()
}

// Serve serves h on ln until ctx is done, then shuts the server down; it
// returns nil then, or the error that ended serving before.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if o.OnStop != nil {
			o.OnStop()
		}
		return err
	case <-ctx.Done():
		if o.OnStop != nil {
			o.OnStop()
		}
		if o.Drain <= 0 {
			srv.Close()
			return nil
		}
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Drain)
		defer cancel()
		srv.Shutdown(shutdown)
		return nil
	}
}

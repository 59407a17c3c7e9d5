package httpserve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var opts = ListenOptions{Flag: "--http", Example: "127.0.0.1:8767", Why: "so that only your clients can run commands"}

func TestListenRefusesBeyondLoopbackWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
		ln, err := Listen(addr, "", opts)
		if err == nil {
			ln.Close()
			t.Errorf("%s without a token: listening", addr)
			continue
		}
		if !strings.Contains(err.Error(), "--http "+addr+" listens beyond this machine: give --auth-token (or $CORRAL_AUTH_TOKEN)") {
			t.Errorf("%s: %v", addr, err)
		}
	}
	if _, err := Listen("8767", "", opts); err == nil || !strings.Contains(err.Error(), "want HOST:PORT, e.g. 127.0.0.1:8767") {
		t.Errorf("no port: %v", err)
	}
	// With a token, every address; loopback needs none.
	for _, c := range []struct{ addr, token string }{{"0.0.0.0:0", "t"}, {"127.0.0.1:0", ""}, {"localhost:0", ""}} {
		ln, err := Listen(c.addr, c.token, opts)
		if err != nil {
			t.Errorf("%s token %q: %v", c.addr, c.token, err)
			continue
		}
		ln.Close()
	}
}

func TestListenDefaultHost(t *testing.T) {
	o := opts
	o.DefaultHost = "127.0.0.1"
	ln, err := Listen(":0", "", o)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("an empty host with DefaultHost 127.0.0.1 listens on %s", ln.Addr())
	}
}

func TestToken(t *testing.T) {
	t.Setenv(TokenEnv, "from-env")
	if got := Token(""); got != "from-env" {
		t.Errorf("Token(\"\") = %q", got)
	}
	if got := Token("flag"); got != "flag" {
		t.Errorf("Token(flag) = %q", got)
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"s3cret", "s3cret", true},
		{"", "", true},
		{"s3cret", "s3cre", false},
		{"s3cret", "s3cretx", false},
		{"s3cret", "S3cret", false},
		{"", "s3cret", false},
	} {
		if got := Equal(c.a, c.b); got != c.want {
			t.Errorf("Equal(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// serve sends r through the guard to a handler that answers 200 "in".
func serve(g Guard, r *http.Request) *httptest.ResponseRecorder {
	w, _ := reach(g, r)
	return w
}

// reach is serve, and whether the request reached the handler.
func reach(g Guard, r *http.Request) (w *httptest.ResponseRecorder, reached bool) {
	w = httptest.NewRecorder()
	g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		io.WriteString(w, "in")
	})).ServeHTTP(w, r)
	return w, reached
}

func TestGuard(t *testing.T) {
	for _, tt := range []struct {
		name   string
		g      Guard
		method string
		target string
		host   string
		header map[string]string
		want   int
	}{
		{"loopback", Guard{}, "GET", "/", "127.0.0.1:80", nil, 200},
		{"localhost", Guard{}, "GET", "/", "localhost:8765", nil, 200},
		{"IPv6 loopback", Guard{}, "GET", "/", "[::1]:80", nil, 200},
		{"no port", Guard{}, "GET", "/", "127.0.0.1", nil, 200},
		{"rebound name", Guard{}, "GET", "/", "evil.example:80", nil, 403},
		{"a name for 127.0.0.1", Guard{}, "GET", "/", "127.0.0.1.nip.io:80", nil, 403},
		{"a .localhost name", Guard{}, "GET", "/", "evil.localhost:80", nil, 403},
		{"no host", Guard{}, "GET", "/", "", nil, 403},
		{"no token", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", nil, 401},
		{"wrong token", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "Bearer wrong"}, 401},
		{"token's prefix", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "Bearer s3cre"}, 401},
		{"token and more", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "Bearer s3cretx"}, 401},
		{"bare token", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "s3cret"}, 401},
		{"basic", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "Basic s3cret"}, 401},
		{"bearer", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Authorization": "Bearer s3cret"}, 200},
		{"cookie not taken", Guard{Token: "s3cret"}, "GET", "/", "10.0.0.1:80", map[string]string{"Cookie": "corral_token=s3cret"}, 401},
		{"query not taken", Guard{Token: "s3cret"}, "GET", "/?token=s3cret", "10.0.0.1:80", nil, 401},
		{"cookie", Guard{Token: "s3cret", Cookie: "corral_token"}, "GET", "/", "10.0.0.1:80", map[string]string{"Cookie": "corral_token=s3cret"}, 200},
		{"wrong cookie", Guard{Token: "s3cret", Cookie: "corral_token"}, "GET", "/", "10.0.0.1:80", map[string]string{"Cookie": "corral_token=wrong"}, 401},
		{"wrong query", Guard{Token: "s3cret", Cookie: "corral_token"}, "GET", "/?token=wrong", "10.0.0.1:80", nil, 401},
		{"query on a POST", Guard{Token: "s3cret", Cookie: "corral_token"}, "POST", "/?token=s3cret", "10.0.0.1:80", nil, 401},
		{"same-origin POST", Guard{}, "POST", "/", "127.0.0.1:80", map[string]string{"Origin": "http://127.0.0.1:80"}, 200},
		{"cross-origin POST", Guard{}, "POST", "/", "127.0.0.1:80", map[string]string{"Origin": "http://evil.example"}, 403},
		{"cross-origin DELETE with the token", Guard{Token: "s3cret"}, "DELETE", "/", "127.0.0.1:80", map[string]string{"Origin": "http://evil.example", "Authorization": "Bearer s3cret"}, 403},
		{"null origin", Guard{}, "PUT", "/", "127.0.0.1:80", map[string]string{"Origin": "null"}, 403},
		{"cross-origin GET", Guard{}, "GET", "/", "127.0.0.1:80", map[string]string{"Origin": "http://evil.example"}, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			r.Host = tt.host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w, reached := reach(tt.g, r)
			if w.Code != tt.want {
				t.Fatalf("%d %q, want %d", w.Code, w.Body, tt.want)
			}
			if reached != (tt.want == 200) {
				t.Errorf("%d, and the handler saw the request: %v", w.Code, reached)
			}
			if got := w.Header().Get("WWW-Authenticate"); (w.Code == 401) != (got != "") {
				t.Errorf("WWW-Authenticate %q with %d", got, w.Code)
			}
		})
	}
}

func TestGuardTokenVisitSetsCookie(t *testing.T) {
	g := Guard{Token: "s3cret", Cookie: "corral_token"}
	r := httptest.NewRequest("GET", "/sessions/s1?from=3&token=s3cret", nil)
	r.Host = "10.0.0.1"
	w, reached := reach(g, r)
	if reached {
		t.Error("the handler saw the token's visit")
	}
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/sessions/s1?from=3" {
		t.Fatalf("%d Location %q", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || c[0].Name != "corral_token" || c[0].Value != "s3cret" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookies %+v", c)
	}
}

func TestGuardDeny(t *testing.T) {
	var got []Refusal
	g := Guard{Token: "s3cret", Deny: func(w http.ResponseWriter, r *http.Request, why Refusal) {
		got = append(got, why)
		w.WriteHeader(http.StatusTeapot)
	}}
	r := httptest.NewRequest("GET", "/", nil)
	if w := serve(g, r); w.Code != http.StatusTeapot || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	g.Token = ""
	r.Host = "evil.example"
	serve(g, r)
	if len(got) != 2 || got[0] != NoToken || got[1] != WrongHost {
		t.Errorf("refusals %v", got)
	}
}

// TestServe: a real server answers until its context ends; then OnStop runs,
// and with no drain even a response that never ends is cut.
func TestServe(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", "", opts)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := Guard{Token: "s3cret"}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done() // an event stream
	}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, ServeOptions{OnStop: func() { close(stopped) }}) }()

	url := "http://" + ln.Addr().String() + "/"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 401 {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); line != "hello\n" {
		t.Fatalf("stream: %q", line)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	<-stopped
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the stream went on after the shutdown")
	}
	if _, err := http.Get(url); err == nil {
		t.Error("answering after the shutdown")
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	var stopped bool
	err = Serve(context.Background(), ln, http.NotFoundHandler(), ServeOptions{OnStop: func() { stopped = true }})
	if err == nil || errors.Is(err, http.ErrServerClosed) || !stopped {
		t.Errorf("Serve on a closed listener: %v, OnStop ran: %v", err, stopped)
	}
}

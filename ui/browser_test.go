package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corralhq/corral/egress"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/tools"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m))
}

// chromium returns the path of Debian's chromium (or $CORRAL_CHROMIUM). A
// test skips without it, and fails in CI, where it must be there.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CORRAL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no chromium: apt-get install chromium (the setup script does)")
	}
	t.Skip("skipping: no chromium (apt-get install chromium)")
	return ""
}

// screenshotDir is where the browser tests leave their screenshots:
// $CORRAL_SCREENSHOTS, else a directory in the system's temporary one.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("CORRAL_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "corral-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in a container has no user namespaces for it
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	// Quality 100 gives a PNG.
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(screenshotDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// evalTrue waits until the expression is true in the page.
func evalTrue(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("%s: %v\n(%s)\npage:\n%.4000s", what, err, expr, html)
	}
}

// TestBrowser drives the web view in a real headless Chromium while a real
// session (sandbox, policy, tools) runs: the timeline shows a command's output
// with its colours and no terminal escape acting, an edit's diff, a command
// that waits for approval, a session approval that runs it and spares the
// next identical command the question, and a denial whose reason reaches the
// model. Then the report of the same run, in the same browser.
func TestBrowser(t *testing.T) {
	testenv.NeedsDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bctx := browser(t, ctx)

	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "src", "app.py"), []byte("def add(a, b):\n    return a - b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The commands' chmod needs them to own the files: as root, hand the
	// workspace to an unprivileged user (commands never run as root).
	if os.Geteuid() == 0 {
		for _, p := range []string{ws, filepath.Join(ws, "src"), filepath.Join(ws, "src", "app.py")} {
			if err := os.Chown(p, 65532, 65532); err != nil {
				t.Fatal(err)
			}
		}
	}
	box, err := docker.New(sandbox.Config{Workspace: ws, Image: testenv.Image, Agent: testenv.Agent(t), Memory: 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	hub := NewHub()
	var file strings.Builder
	rec := hub.Session(box.Session(), ws)
	s, err := tools.NewSession(ctx, tools.Options{
		Workspace: ws, ID: box.Session(), Sandbox: box, Confirmer: hub.Confirmer(),
		Events: tools.EventFunc(func(e tools.Event) { rec.Emit(e); b, _ := json.Marshal(e); file.Write(append(b, '\n')) }),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(hub.Handler(Options{}))
	t.Cleanup(srv.Close)

	call := func(id, tool string, args any) tools.Result {
		t.Helper()
		raw, _ := json.Marshal(args)
		r, err := s.Call(tools.WithCallID(ctx, id), tool, raw)
		if err != nil {
			t.Fatalf("%s %s: %v", tool, id, err)
		}
		return r
	}
	// History before the page opens: the page shows it all.
	call("c1", "bash", map[string]any{"command": `printf '\033]0;pwned title\007\033[2J\033[1;31mFAILED\033[0m plain <img src=x onerror=alert(1)>\n'; echo done`})
	call("c2", "read", map[string]any{"path": "src/app.py"})
	if r := call("c3", "edit", map[string]any{"path": "src/app.py", "oldText": "return a - b", "newText": "return a + b"}); r.IsError {
		t.Fatalf("edit: %s", r.Content)
	}

	page := srv.URL + "/sessions/" + box.Session()
	if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	evalTrue(t, bctx, "the command's output, coloured", `(() => {
		const sp = document.querySelector('[data-call="c1"] .term span.fg1.b');
		return !!sp && sp.textContent === "FAILED" && document.querySelector('[data-call="c1"] .term').textContent.includes("done");
	})()`)
	type pageChecks struct {
		Title string `json:"title"`
		Img   bool   `json:"img"`
		Text  string `json:"text"`
	}
	checks, err := chromedp.Run(bctx, chromedp.Evaluate[pageChecks](`({title: document.title, img: !!document.querySelector('.term img'),
		text: document.querySelector('[data-call="c1"] .term').textContent})`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(checks.Title, "pwned") || checks.Img || strings.Contains(checks.Text, "pwned") || !strings.Contains(checks.Text, "<img src=x") {
		t.Errorf("terminal escapes or HTML acted: %+v", checks)
	}
	evalTrue(t, bctx, "the edit's diff, side by side", `(() => {
		const d = document.querySelector('[data-call="c3"] table.diff.split');
		return !!d && !!d.querySelector('td.del') && d.querySelector('td.del').textContent.includes("return a - b") &&
			d.querySelector('td.add').textContent.includes("return a + b");
	})()`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-call="c3"] .diffbar button:first-child`))); err != nil {
		t.Fatal(err)
	}
	evalTrue(t, bctx, "the edit's diff, unified", `!!document.querySelector('[data-call="c3"] table.diff.unified td.add')`)

	// A confirm-class command waits for the page.
	type answer struct {
		r   tools.Result
		err error
	}
	async := func(id, command string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			raw, _ := json.Marshal(map[string]string{"command": command})
			r, err := s.Call(tools.WithCallID(ctx, id), "bash", raw)
			ch <- answer{r, err}
		}()
		return ch
	}
	first := async("c4", "chmod -R go-w src")
	evalTrue(t, bctx, "the approval with its decisions", `(() => {
		const a = document.querySelector('[data-call="c4"] .approval:not(.done)');
		return !!a && a.textContent.includes("chmod -R go-w src") && a.textContent.includes("default:chmod-workspace") &&
			["once", "session", "deny", "abort"].every(d => a.querySelector('button[data-decision="' + d + '"]'));
	})()`)
	select {
	case a := <-first:
		t.Fatalf("the command did not wait: %q", a.r.Content)
	default:
	}
	screenshot(t, bctx, "session-approval.png")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-call="c4"] button[data-decision="session"]`))); err != nil {
		t.Fatal(err)
	}
	a := <-first
	if a.err != nil || a.r.IsError || !strings.Contains(a.r.Content, "Exit code: 0") {
		t.Fatalf("after session: %v %q", a.err, a.r.Content)
	}
	evalTrue(t, bctx, "the approval decided", `(() => {
		const a = document.querySelector('[data-call="c4"] .approval.done');
		return !!a && a.textContent.includes("decided: session (web)");
	})()`)
	// The same command again: not asked.
	second := <-async("c5", "chmod -R go-w src")
	if second.err != nil || second.r.IsError || !second.r.Details.(*tools.BashDetails).Remembered {
		t.Fatalf("the second identical command: %v %q", second.err, second.r.Content)
	}
	evalTrue(t, bctx, "the second command ran without an approval", `(() => {
		const c = document.querySelector('[data-call="c5"]');
		return !!c && c.classList.contains("ended") && !c.querySelector('.approval') && c.textContent.includes("not asked again");
	})()`)

	// Deny with a reason.
	third := async("c6", "rm -r src")
	evalTrue(t, bctx, "the second approval", `!!document.querySelector('[data-call="c6"] .approval:not(.done) button[data-decision="deny"]')`)
	reason := "keep src; delete only build output"
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.CSS(`[data-call="c6"] .approval input[name="reason"]`), reason),
		chromedp.Click(chromedp.CSS(`[data-call="c6"] button[data-decision="deny"]`)),
	); err != nil {
		t.Fatal(err)
	}
	d := <-third
	if d.err != nil || !d.r.IsError || !strings.Contains(d.r.Content, "The user says: "+reason) {
		t.Fatalf("deny: %v %q", d.err, d.r.Content)
	}
	if _, err := os.Stat(filepath.Join(ws, "src", "app.py")); err != nil {
		t.Errorf("a denied rm ran: %v", err)
	}
	evalTrue(t, bctx, "the denial on the page", `(() => {
		const c = document.querySelector('[data-call="c6"]');
		return !!c && c.classList.contains("ended") && c.textContent.includes("decided: deny (web) — keep src") && c.textContent.includes("not approved");
	})()`)
	if err := chromedp.Do(bctx, chromedp.ScrollIntoView(chromedp.CSS(`#summary`))); err != nil {
		t.Fatal(err)
	}
	evalTrue(t, bctx, "the summary", `document.querySelector('#summary').textContent.includes("approvals2 (deny 1, session 1), 1 remembered")`)
	screenshot(t, bctx, "session.png")

	// The report of the same run, opened from a file.
	rec.Close()
	rh := NewHub()
	if err := rh.Load(strings.NewReader(file.String()), "run.jsonl"); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(screenshotDir(t), "report.html")
	out, err := os.Create(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteReport(out, rh, "browser test"); err != nil {
		t.Fatal(err)
	}
	out.Close()
	if err := chromedp.Do(bctx, chromedp.Navigate("file://"+report)); err != nil {
		t.Fatal(err)
	}
	evalTrue(t, bctx, "the report's summary and timeline", `(() => {
		const sum = document.querySelector('table.summary').textContent;
		const files = document.querySelector('table.files').textContent;
		return sum.includes("calls") && /calls\s*6/.test(sum) && /approvals\s*2/.test(sum) &&
			files.includes("src/app.py") && files.includes("+1") &&
			!!document.querySelector('[data-call="c1"] .term span.fg1') && !!document.querySelector('[data-call="c3"] table.diff');
	})()`)
	screenshot(t, bctx, "report.png")
}

// TestBrowserHostApproval: with --network allow, a host no list names waits
// in the page as an approval card — the host and port, the command it came
// during (its bidirectional override shown escaped, so it cannot read as
// another command), the [network] rule it proposes — and a click on session
// lets the command reach it.
func TestBrowserHostApproval(t *testing.T) {
	testenv.NeedsDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bctx := browser(t, ctx)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	defer upstream.Close()
	port := upstream.Listener.Addr().(*net.TCPAddr).Port

	ws := t.TempDir()
	script := "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1], timeout=120).read().decode())\n"
	if err := os.WriteFile(filepath.Join(ws, "fetch.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var session atomic.Pointer[tools.Session]
	calls := &egress.Calls{}
	proxy, err := egress.New(egress.Config{
		Hosts:  []string{"pkgs.test:127.0.0.1"},
		CallID: calls.Current,
		Approver: egress.ApproverFunc(func(ctx context.Context, req egress.Request) (egress.Decision, error) {
			return session.Load().ApproveHost(ctx, req)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	box, err := docker.New(sandbox.Config{Workspace: ws, Image: testenv.Image, Agent: testenv.Agent(t), Memory: 512 << 20, Egress: proxy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		box.Close(ctx)
	})
	hub := NewHub()
	rec := hub.Session(box.Session(), ws)
	defer rec.Close()
	s, err := tools.NewSession(ctx, tools.Options{
		Workspace: ws, ID: box.Session(), Sandbox: box, Confirmer: hub.Confirmer(), Events: rec, Network: calls,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	session.Store(s)
	srv := httptest.NewServer(hub.Handler(Options{}))
	t.Cleanup(srv.Close)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/sessions/"+box.Session())); err != nil {
		t.Fatal(err)
	}

	done := make(chan tools.Result, 1)
	go func() {
		raw, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("python3 fetch.py http://pkgs.test:%d/ # \u202etxt.daer", port)})
		r, err := s.Call(tools.WithCallID(ctx, "h1"), "bash", raw)
		if err != nil {
			r = tools.Result{Content: err.Error()}
		}
		done <- r
	}()
	evalTrue(t, bctx, "the host's approval card", fmt.Sprintf(`(() => {
		const a = document.querySelector('[data-call="h1"] .approval:not(.done)');
		return !!a && a.textContent.includes("Network access needed") && a.textContent.includes("reach pkgs.test:%d") &&
			a.textContent.includes('[network] allow "pkgs.test:%d"') && a.textContent.includes("while this command ran:") &&
			a.textContent.includes("# \\u202etxt.daer") && !document.querySelector('[data-call="h1"]').textContent.includes("\u202e") &&
			["once", "session", "deny", "abort"].every(d => a.querySelector('button[data-decision="' + d + '"]'));
	})()`, port, port))
	screenshot(t, bctx, "host-approval.png")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-call="h1"] button[data-decision="session"]`))); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.IsError || !strings.Contains(r.Content, "hello from pkgs.test") {
		t.Fatalf("after session: %q", r.Content)
	}
	evalTrue(t, bctx, "the host's approval decided", `(() => {
		const a = document.querySelector('[data-call="h1"] .approval.done');
		return !!a && a.textContent.includes("decided: session (web)");
	})()`)
}

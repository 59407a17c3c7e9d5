package docker

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/corralhq/corral/sandbox"
)

// After a kill -9 of its corral process, a sandbox is reaped by GC; live
// owners' sandboxes and other hosts' are left alone.
func TestGCAfterKill(t *testing.T) {
	need(t)
	cfg := testConfig(t)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=1",
		"HELPER_WORKSPACE="+cfg.Workspace, "HELPER_AGENT="+testAgent, "HELPER_IMAGE="+testImage, "HELPER_SESSION="+cfg.Session)
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		line <- sc.Text()
	}()
	var id string
	select {
	case id = <-line:
	case <-time.After(2 * time.Minute):
		helper.Process.Kill()
		t.Fatal("the helper did not start a sandbox")
	}
	if strings.HasPrefix(id, "error") || id == "" {
		t.Fatalf("helper: %s", id)
	}
	api, _ := engine()
	ctx := context.Background()
	t.Cleanup(func() { _ = api.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}) })

	// A container that looks like another host's, with a dead pid.
	foreign := createBare(t, map[string]string{sandbox.LabelSession: "test-foreign", sandbox.LabelPID: "999999", sandbox.LabelHost: "another-host"})

	infos, err := List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, in := range infos {
		if in.ID == id {
			found = true
			if !in.Local || !in.OwnerAlive || in.Session != cfg.Session || in.Workspace != cfg.Workspace || in.State != "running" {
				t.Errorf("live sandbox listed as %+v", in)
			}
		}
	}
	if !found {
		t.Fatalf("List does not show the helper's sandbox %s", id)
	}
	// While the owner lives, GC keeps it.
	removed, err := GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(removed, "corral-"+cfg.Session) {
		t.Fatal("GC removed a live owner's sandbox")
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	// With its owner's attach connection gone, the agent's stdin closes and
	// the container stops by itself: nothing keeps running.
	waitFor(t, 30*time.Second, "the orphaned container to stop", func() bool {
		in, err := api.ContainerInspect(ctx, id)
		return err == nil && in.State != nil && !in.State.Running
	})
	removed, err = GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, "corral-"+cfg.Session) {
		t.Errorf("GC removed %v, want corral-%s", removed, cfg.Session)
	}
	if _, err := api.ContainerInspect(ctx, id); !isNotFound(err) {
		t.Errorf("the container is still there: %v", err)
	}
	if _, err := api.ContainerInspect(ctx, foreign); err != nil {
		t.Errorf("GC removed another host's container: %v", err)
	}
}

// createBare creates (without starting) a labelled container that is not a
// sandbox of this process; the test removes it.
func createBare(t *testing.T, labels map[string]string) string {
	t.Helper()
	api, _ := engine()
	ctx := context.Background()
	resp, err := api.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"true"}, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	return resp.ID
}

// Close removes the container even with a cancelled context (after SIGINT).
func TestCloseWithCancelledContext(t *testing.T) {
	cfg := testConfig(t)
	c := newSandbox(t, cfg)
	id := containerID(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	api, _ := engine()
	if _, err := api.ContainerInspect(context.Background(), id); !isNotFound(err) {
		t.Errorf("container still there after Close: %v", err)
	}
	if _, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("exec after close: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// Close during a command ends it: the call returns.
func TestCloseDuringExec(t *testing.T) {
	c := newSandbox(t, testConfig(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "sleep 100"})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("pending exec: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pending exec hung after Close")
	}
}

func TestImageNotFound(t *testing.T) {
	need(t)
	cfg := testConfig(t)
	cfg.Image = "corral-test/no-such-image:never"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	_, err = c.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
	var nf *sandbox.ImageNotFoundError
	if !errors.As(err, &nf) || nf.Image != cfg.Image {
		t.Fatalf("error %v, want ImageNotFoundError", err)
	}
	if !strings.Contains(err.Error(), "docker build") || !strings.Contains(err.Error(), "docker pull") {
		t.Errorf("message %q names no way to get the image", err)
	}
	if msg := (&sandbox.ImageNotFoundError{Image: sandbox.DefaultImage}).Error(); !strings.Contains(msg, "corral image build") {
		t.Errorf("default image message %q", msg)
	}
}

func TestNewValidates(t *testing.T) {
	ws := t.TempDir()
	file := ws + "/file"
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	need(t) // for the agent binary that setup builds
	agent := testAgent
	bad := []sandbox.Config{
		{},
		{Workspace: "relative"},
		{Workspace: ws + "/missing"},
		{Workspace: file},
		{Workspace: ws, Network: "host"},
		{Workspace: ws, PidsLimit: 3},
		{Workspace: ws, Memory: 1 << 20},
		{Workspace: ws, CPUs: -1},
		{Workspace: ws, Env: []string{"NOVALUE"}},
		{Workspace: ws, ReadOnlyMounts: []string{"rel"}},
		{Workspace: ws, Agent: file},
	}
	for _, cfg := range bad {
		if cfg.Agent == "" {
			cfg.Agent = agent
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	var ae *sandbox.AgentError
	if _, err := New(sandbox.Config{Workspace: ws, Agent: file}); !errors.As(err, &ae) {
		t.Errorf("an agent that is not an executable: %v, want an AgentError", err)
	}
	c, err := New(sandbox.Config{Workspace: ws, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Image != sandbox.DefaultImage || c.cfg.Network != "none" || c.cfg.PidsLimit != sandbox.DefaultPidsLimit || c.cfg.Memory != sandbox.DefaultMemory || c.Session() == "" {
		t.Errorf("defaults %+v", c.cfg)
	}
}

// Close during the container's start (Ctrl-C right after launch) leaves no
// container behind.
func TestCloseDuringStart(t *testing.T) {
	need(t)
	cfg := testConfig(t)
	api, _ := engine()
	for _, delay := range []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(context.Background(), sandbox.ExecRequest{Command: "true"})
			done <- err
		}()
		time.Sleep(delay)
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close after %v: %v", delay, err)
		}
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, sandbox.ErrClosed) {
				t.Errorf("exec closed after %v: %v", delay, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("exec hung")
		}
		infos, err := list(context.Background(), api)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.Session == cfg.Session {
				t.Errorf("close after %v left %s (%s)", delay, in.Name, in.State)
			}
		}
	}
}

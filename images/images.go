// Package images holds the Dockerfiles of corral's sandbox images and the script that
// builds them (build.sh), embedded so that the corral binary can build its default
// image without the source tree.
//
// Building needs bash and the docker CLI on the host. When the base image cannot be
// pulled (no registry), build.sh bootstraps it with debootstrap from Debian's mirror,
// which needs root (or sudo) and the debootstrap package; see build.sh.
package images

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Default is the image a sandbox uses unless told otherwise. It equals
// sandbox.DefaultImage (a test checks it).
const Default = "corral/dev:bookworm"

// Base is the Debian bookworm base that build.sh bootstraps with debootstrap and
// imports when the Dockerfile's base image cannot be pulled.
const Base = "corral/base:bookworm"

// RoleLabel is carried by every image that build.sh makes: "dev" for a sandbox
// image, "base" for a bootstrapped base. List filters on it.
const RoleLabel = "corral.image.role"

// Files holds build.sh and the build context of each image (dev/).
//
//go:embed build.sh all:dev
var Files embed.FS

// exitStale is build.sh's exit status for --check when the image is missing or out
// of date.
const exitStale = 3

// BuildOptions tells Build what to build and where its progress goes.
type BuildOptions struct {
	// Name is the tag of the image; Default when empty.
	Name string
	// Base is the image to build FROM; build.sh's default (debian:bookworm-slim,
	// bootstrapped when it cannot be pulled) when empty.
	Base string
	// Force rebuilds even when the image is up to date, without the layer cache.
	Force bool
	// Stdout and Stderr receive docker build's progress and build.sh's messages;
	// discarded when nil.
	Stdout, Stderr io.Writer
	// Stdin is given to build.sh (sudo may ask for a password there); empty when nil.
	Stdin io.Reader
}

// Build builds the image unless it is up to date, by running the embedded build.sh
// from a temporary directory. Cancelling ctx stops the build.
func Build(ctx context.Context, opts BuildOptions) error {
	args := buildArgs(opts.Name, opts.Base)
	if opts.Force {
		args = append(args, "--force")
	}
	var tail tailBuffer
	stderr := io.Writer(&tail)
	if opts.Stderr != nil {
		stderr = io.MultiWriter(opts.Stderr, &tail)
	}
	if err := runScript(ctx, args, opts.Stdin, opts.Stdout, stderr); err != nil {
		return scriptError(ctx, "building", opts.Name, err, &tail)
	}
	return nil
}

// UpToDate reports whether the image exists and was built from the embedded
// Dockerfile and build.sh (and base, "" for the default). It needs the Docker engine
// but builds nothing.
func UpToDate(ctx context.Context, name, base string) (bool, error) {
	var stderr tailBuffer
	err := runScript(ctx, append(buildArgs(name, base), "--check"), nil, nil, &stderr)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == exitStale:
		return false, nil
	default:
		return false, scriptError(ctx, "checking", name, err, &stderr)
	}
}

// scriptError describes a failed run of build.sh by its last message.
func scriptError(ctx context.Context, verb, name string, err error, stderr *tailBuffer) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s image %s: %w", verb, nameOrDefault(name), ctx.Err())
	}
	var exit *exec.ExitError
	if msg := stderr.lastLine(); msg != "" && errors.As(err, &exit) {
		return fmt.Errorf("%s image %s: %s (%w)", verb, nameOrDefault(name), msg, err)
	}
	return fmt.Errorf("%s image %s: %w", verb, nameOrDefault(name), err)
}

func buildArgs(name, base string) []string {
	args := []string{"--name", nameOrDefault(name)}
	if base != "" {
		args = append(args, "--base", base)
	}
	return args
}

func nameOrDefault(name string) string {
	if name == "" {
		return Default
	}
	return name
}

// runScript extracts Files to a temporary directory and runs build.sh there.
func runScript(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	for _, tool := range []string{"bash", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: building images needs bash and the docker CLI", tool)
		}
	}
	dir, err := os.MkdirTemp("", "corral-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := extract(dir); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(dir, "build.sh")}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// build.sh stops what it runs (docker build, debootstrap) and cleans up on
	// SIGTERM; SIGKILL only if it has not ended a while later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd.Run()
}

// extract writes Files under dir.
func extract(dir string) error {
	return fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := Files.ReadFile(path)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".sh") {
			mode = 0o755
		}
		return os.WriteFile(target, data, mode)
	})
}

// Image describes an image that build.sh made.
type Image struct {
	Name    string    // REPOSITORY:TAG
	ID      string    // sha256:...
	Role    string    // "dev" for a sandbox image, "base" for a bootstrapped base
	Version string    // the corral.image.version label, "" on a base
	Created time.Time // when it was built
	Size    int64     // bytes
}

// List returns the tagged images on the engine that build.sh made (those labelled
// RoleLabel), sorted by name. It runs the docker CLI.
func List(ctx context.Context) ([]Image, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return nil, errors.New("the docker CLI is not installed: listing images runs docker image ls")
	}
	out, err := dockerOutput(ctx, "image", "ls", "--filter", "label="+RoleLabel, "--filter", "dangling=false",
		"--format", "{{.Repository}}:{{.Tag}}")
	if err != nil {
		return nil, err
	}
	names := strings.Fields(out)
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out, err = dockerOutput(ctx, append([]string{"image", "inspect", "--format", "{{json .}}"}, names...)...)
	if err != nil {
		return nil, err
	}
	var list []Image
	dec := json.NewDecoder(strings.NewReader(out))
	for i := 0; dec.More() && i < len(names); i++ {
		var info struct {
			ID      string `json:"Id"`
			Created time.Time
			Size    int64
			Config  struct{ Labels map[string]string }
		}
		if err := dec.Decode(&info); err != nil {
			return nil, fmt.Errorf("docker image inspect: %w", err)
		}
		list = append(list, Image{
			Name:    names[i],
			ID:      info.ID,
			Role:    info.Config.Labels[RoleLabel],
			Version: info.Config.Labels["corral.image.version"],
			Created: info.Created,
			Size:    info.Size,
		})
	}
	return list, nil
}

// dockerOutput runs the docker CLI and returns its standard output; its standard
// error goes into the error.
func dockerOutput(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("docker %s: %s", args[0]+" "+args[1], msg)
	}
	return stdout.String(), nil
}

// tailBuffer keeps the last few KiB written to it, to quote the script's last
// message in an error.
type tailBuffer struct{ buf []byte }

const tailMax = 4096

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line written, without build.sh's prefix.
func (t *tailBuffer) lastLine() string {
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	last := strings.TrimSpace(string(lines[len(lines)-1]))
	last = strings.TrimPrefix(last, "build.sh: ")
	return strings.TrimPrefix(last, "error: ")
}

package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// DerivedImage builds an image for tests from dockerfile, which builds FROM
// the sandbox image (it gets ARG BASE), once per content: its tag is
// corral-test/NAME:HASH, HASH from the Dockerfile and the sandbox image's ID,
// and while that image exists it is used as it is. After a build the older
// tags of NAME go. Building needs no context: the Dockerfile's RUN steps fetch
// what they install (Debian's mirror is reachable from docker build). It fails
// the test when the build fails.
func DerivedImage(t testing.TB, name, dockerfile string) string {
	t.Helper()
	tag, ok := CachedImage(t, name, dockerfile)
	if ok {
		return tag
	}
	repo, _, _ := strings.Cut(tag, ":")
	t.Logf("building the test image %s (once: later runs reuse it while its Dockerfile and %s stay the same)", tag, Image)
	build := exec.Command("docker", "build", "--quiet", "--build-arg", "BASE="+Image, "--label", "corral.test=image", "-t", tag, "-")
	build.Stdin = strings.NewReader(dockerfile)
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test image %s: %v\n%s", tag, err, tail(out, 4000))
	}
	old, _ := exec.Command("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repo).Output()
	for _, o := range strings.Fields(string(old)) {
		if o != tag {
			_ = exec.Command("docker", "image", "rm", o).Run()
		}
	}
	return tag
}

// CachedImage returns the tag DerivedImage gives the image, and whether it
// is built.
func CachedImage(t testing.TB, name, dockerfile string) (string, bool) {
	t.Helper()
	NeedsDocker(t)
	base, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", Image).Output()
	if err != nil {
		t.Fatalf("the sandbox image %s: %v", Image, err)
	}
	sum := sha256.Sum256([]byte(dockerfile + "\x00" + strings.TrimSpace(string(base))))
	tag := "corral-test/" + name + ":" + hex.EncodeToString(sum[:6])
	return tag, exec.Command("docker", "image", "inspect", tag).Run() == nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

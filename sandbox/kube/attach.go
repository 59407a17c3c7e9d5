package kube

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
)

// attachStream is one pods/attach connection to a sandbox container's agent,
// as the io.ReadWriteCloser sandbox.Dial takes: reads are the agent's
// stdout, writes its stdin. It speaks WebSocket, and SPDY where the API
// server (or a proxy before it) cannot upgrade to WebSocket.
type attachStream struct {
	exec   remotecommand.Executor
	ctx    context.Context
	cancel context.CancelFunc
	inR    *io.PipeReader
	inW    *io.PipeWriter
	outR   *io.PipeReader
	outW   *io.PipeWriter
	stderr io.Writer // the agent's stderr; set before run

	once sync.Once
	done chan struct{} // closed when run returns
}

// attach prepares the attach stream of pod name's sandbox container; run
// starts it.
func (b *Backend) attach(name string) (*attachStream, error) {
	u := b.api.podURL(name, "attach", &corev1.PodAttachOptions{Container: sandboxContainer, Stdin: true, Stdout: true, Stderr: true})
	exec, err := b.executor(u)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach to pod %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &attachStream{exec: exec, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.inR, s.inW = io.Pipe()
	s.outR, s.outW = io.Pipe()
	return s, nil
}

// executor returns a remote command executor for url (an attach or exec
// URL): WebSocket first, SPDY when the upgrade fails.
func (b *Backend) executor(u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// run carries the stream until it ends or is closed; then reads fail with
// why.
func (s *attachStream) run() {
	stderr := s.stderr
	if stderr == nil {
		stderr = io.Discard
	}
	err := s.exec.StreamWithContext(s.ctx, remotecommand.StreamOptions{Stdin: s.inR, Stdout: s.outW, Stderr: stderr})
	if err == nil {
		err = io.EOF
	}
	s.outW.CloseWithError(err)
	s.inR.CloseWithError(err)
	close(s.done)
}

func (s *attachStream) Read(p []byte) (int, error)  { return s.outR.Read(p) }
func (s *attachStream) Write(p []byte) (int, error) { return s.inW.Write(p) }

// Close ends the stream: the agent's stdin closes (the pod's container has
// StdinOnce), and it exits.
func (s *attachStream) Close() error {
	s.once.Do(func() {
		s.inW.Close()
		s.outR.Close()
		// The agent exits at the end of its stdin, and the stream with it;
		// one that does not within a moment is cut.
		go func() {
			t := time.NewTimer(2 * time.Second)
			defer t.Stop()
			select {
			case <-s.done:
			case <-t.C:
			}
			s.cancel()
		}()
	})
	return nil
}

// Command library is the README's example of corral's Go library: one session on
// a workspace, a command in the sandbox, its full log read back in the sandbox,
// and an edit. Run it as `go run ./examples/library DIR`.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"

	"github.com/corralhq/corral"
	"github.com/corralhq/corral/sandbox"
	"github.com/corralhq/corral/sandbox/docker"
	"github.com/corralhq/corral/tools"
)

func main() {
	ctx := context.Background()
	// The agent inside the sandbox is the corral binary (go install
	// github.com/corralhq/corral/cmd/corral@latest).
	agent, err := exec.LookPath("corral")
	if err != nil {
		log.Fatal(err)
	}
	s, err := corral.Open(ctx, corral.Config{
		Workspace:  os.Args[1],
		Backend:    docker.Backend,                // or a Kubernetes backend (sandbox/kube)
		Sandbox:    sandbox.Config{Agent: agent},  // hardened defaults: no network, limits, ...
		PolicyFile: "",                            // the user's rules, if any
		Tools:      tools.Options{Confirmer: nil}, // nil refuses what the policy wants confirmed
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // removes the container and the session's logs

	r, err := s.Bash(ctx, tools.BashParams{Command: "seq 100000"})
	if err != nil {
		log.Fatal(err) // a broken sandbox; a mistake the model can fix is r.IsError
	}
	// r.Content is the model's text; r.Details is for a UI. The full log is
	// mounted read-only in the sandbox at the same path.
	logPath := r.Details.(*tools.BashDetails).LogPath
	r, err = s.Bash(ctx, tools.BashParams{Command: "wc -l '" + logPath + "'"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Content)

	r, err = s.Call(ctx, "edit", json.RawMessage(`{"path":"a.go","oldText":"x","newText":"y"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Content) // no a.go here: a mistake the model can correct (r.IsError)
}

// Command crashagent is a sandbox agent that crashes as a Go program does,
// for the sandbox tests: it answers the host's hello, and when the first
// command comes it prints why it dies, then a long dump of stacks, on stderr
// and exits with status 2.
package main

import (
	"fmt"
	"os"

	"github.com/corralhq/corral/sandbox/proto"
)

func main() {
	in := proto.NewReader(os.Stdin)
	for {
		f, err := in.Next()
		if err != nil {
			os.Exit(1)
		}
		switch f.Type {
		case proto.Hello:
			os.Stdout.Write(proto.JSONFrame(proto.Hello, 0, proto.AgentHelloMsg{Version: proto.Version, Shell: "/bin/sh"}))
		case proto.Ping:
			os.Stdout.Write(proto.AppendFrame(nil, proto.Pong, 0, f.Payload))
		case proto.Start:
			fmt.Fprint(os.Stderr, "fatal error: out of memory allocating heap arena map\n\nruntime stack:\n")
			for i := range 100 {
				fmt.Fprintf(os.Stderr, "goroutine %d [running]:\nruntime.throw(...)\n", i)
			}
			os.Exit(2)
		}
	}
}

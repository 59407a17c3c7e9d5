// Package agent is the program that runs inside every sandbox, whatever its
// backend: it serves the host's protocol (package proto) on its stdin and
// stdout, runs each command in its own terminal, tracks the command's
// processes, and ends them when told to or when the host goes away. The host
// trusts nothing of the sandbox but what this protocol carries.
package agent

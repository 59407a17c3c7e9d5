package policy

import "testing"

// TestShellScopes: what a command changes in the shell reaches exactly as far
// as bash lets it. A function, alias or variable defined in a subshell ends
// with it; a program's shell sees only what is exported; eval, source and a
// function run in the shell that calls them, so a cd there stays. Each of
// the dangerous commands here was allowed, or only confirmed, when the
// walker kept one flat state.
func TestShellScopes(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want Decision
	}{
		// A function defined in a subshell, a pipeline's stage or a
		// background job does not exist after it.
		{"(rm() { :; }); rm -rf ~", Deny},
		{"rm() { :; } | true; rm -rf ~", Deny},
		{"{ rm() { :; }; } & rm -rf ~", Deny},
		{"echo $(rm() { :; }) ; rm -rf ~", Deny},
		// A program's shell has none of the functions, aliases or hashed
		// names of this one.
		{"rm() { :; }; bash -c 'rm -rf ~'", Deny},
		{"rm() { :; }; export -f rm; sh -c 'rm -rf ~'", Deny},
		{"rm() { :; }; xargs -I{} sh -c 'rm -rf {}' <<< ~", Deny},
		// unset without -v removes a function when there is no variable.
		{"rm() { :; }; unset rm; rm -rf ~", Deny},
		{"rm() { :; }; unset -f rm; rm -rf ~", Deny},
		// eval, source and functions run in this shell: their cd stays.
		{"eval 'cd /'; rm -rf *", Deny},
		{"eval cd /tmp; rm -rf *", Deny},
		{"printf 'cd /\\n' > go.sh; . ./go.sh; rm -rf *", Deny},
		{"f() { rm -rf *; }; cd /; f", Deny},
		{"f() { cd /; }; f; rm -rf *", Deny},
		{"command cd /; rm -rf *", Deny},
		// A variable this command did not export reaches a program's shell
		// only as the environment had it: not as assigned here.
		{"x=.txt; bash -c 'echo {} > .mcp.json$x'", Confirm},
		{"x=.txt; sh -c 'cp evil.json .claude/settings.json$x'", Confirm},
		// Assignments by export, declare and their kin run as programs,
		// and namerefs.
		{"x=safe.txt; builtin declare x=.mcp.json; echo {} > $x", Confirm},
		{"x=safe.txt; command export x=.mcp.json; echo {} > $x", Confirm},
		{"declare -n p=x; x=.mcp.json; echo {} > $p", Confirm},
		{"x=.mcp.json; export x; echo {} > \"$x\"", Confirm},
		// A local variable ends with its function.
		{"f() { local d=build; }; d=/; f; rm -rf $d/*", Deny},
		// corral's shells are not interactive: an alias is not expanded
		// there, and the name runs what it names.
		{"alias rm=:; rm -rf ~", Deny},
		{"alias rm='echo'; rm -rf ~", Deny},
		// A name bash cannot find runs command_not_found_handle, in this
		// shell.
		{"command_not_found_handle() { cd /; }; nosuchcmd; rm -rf *", Deny},
		// sh -c STRING NAME: NAME is $0.
		{"bash -c 'rm -rf \"$0\"' /", Deny},
	} {
		if v := Classify(tt.cmd); v.Decision < tt.want {
			t.Errorf("%q: %s by %s (%s), want at least %s", tt.cmd, v.Decision, v.Rule, v.Reason, tt.want)
		}
	}
	// And what does not leave its scope does not follow the command.
	for _, cmd := range []string{
		"(cd /tmp); rm -f build.o",
		"sh -c 'cd /'; rm -f build.o",
		"cd / & rm -f build.o",
		"bash -c 'cd .. && ls'; rm -f out.txt",
		"f() { local x=/etc; ls \"$x\"; }; f; x=build; rm -f \"$x\"/a.o",
		"alias ll='ls -l'; bash -c 'll'",
		"hash -p /bin/rm ls; bash -c 'ls -la'",
	} {
		if v := Classify(cmd); v.Decision != Allow {
			t.Errorf("%q: %s by %s (%s), want allow", cmd, v.Decision, v.Rule, v.Reason)
		}
	}
}

package main

import (
	"github.com/spf13/pflag"

	"github.com/corralhq/corral/policy"
)

// policyFlags are the flags that choose the policy: shared by every command
// that classifies bash commands (check, run, shell, mcp).
type policyFlags struct {
	file   string
	strict bool
}

func (f *policyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "policy", "", "TOML `FILE` of the user's allow, confirm and deny rules, added to the default policy (format: corral check --help)")
	fs.BoolVar(&f.strict, "strict", false, "ask for confirmation before running a program the policy does not know (default: allow it, since the sandbox contains it)")
}

// engineFor builds the policy engine the flags ask for, for commands that
// see the workspace at the absolute path workspace (absolute paths inside it
// count as the workspace's) and are contained as c says. A bad rules file
// gives an error naming the file, the line and what to fix.
func (f *policyFlags) engineFor(workspace string, c policy.Containment) (*policy.Engine, error) {
	opts := policy.Options{Strict: f.strict, Workspace: workspace, Containment: c}
	if f.file != "" {
		rs, err := policy.LoadRules(f.file)
		if err != nil {
			return nil, err
		}
		opts.Rules = rs.List
		opts.MaxFileSize = rs.MaxFileSize
		if rs.Unknown != nil {
			opts.Unknown = *rs.Unknown
		}
	}
	return policy.New(opts)
}

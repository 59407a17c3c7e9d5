package egress

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// Network is the [network] section of a policy file:
//
//	[network]
//	presets = ["python", "github"]
//	allow   = ["*.internal.example:8443", "10.20.0.0/16"]
//	deny    = ["uploads.github.com"]
type Network struct {
	Allow   []string `toml:"allow"`
	Deny    []string `toml:"deny"`
	Presets []string `toml:"presets"`
}

// LoadNetwork reads the [network] section of a policy file; a file without
// one gives the zero Network.
func LoadNetwork(file string) (Network, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Network{}, fmt.Errorf("policy file: %w", err)
	}
	return ParseNetwork(file, data)
}

// ParseNetwork reads the [network] section of a policy file's contents; name
// is the file's name for messages. Every pattern and preset is checked.
func ParseNetwork(name string, data []byte) (Network, error) {
	var raw struct {
		Network Network `toml:"network"`
	}
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Network{}, fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
		}
		return Network{}, fmt.Errorf("%s: [network]: %v (allow, deny and presets are lists of strings)", name, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) > 0 && k[0] == "network" {
			return Network{}, fmt.Errorf("%s: unknown key %q in [network]: it holds allow, deny and presets", name, strings.Join(k[1:], "."))
		}
	}
	n := raw.Network
	for _, list := range [][]string{n.Allow, n.Deny} {
		for _, s := range list {
			if _, err := ParsePattern(s); err != nil {
				return Network{}, fmt.Errorf("%s: [network]: %v", name, err)
			}
		}
	}
	for _, s := range n.Presets {
		if _, ok := Preset(s); !ok {
			return Network{}, fmt.Errorf("%s: [network]: no preset %q (there are %s)", name, s, strings.Join(Presets(), ", "))
		}
	}
	return n, nil
}

// LoadSecrets reads the [secrets] section of a policy file: each secret's
// name (the environment variable that holds its value, in corral's
// environment, and the placeholder, in the sandbox's) and the hosts its value
// may go to:
//
//	[secrets]
//	GITHUB_TOKEN = ["github.com", "api.github.com"]
//
// A file without one gives an empty map.
func LoadSecrets(file string) (map[string][]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	return ParseSecrets(file, data)
}

// ParseSecrets reads the [secrets] section of a policy file's contents; name
// is the file's name for messages.
func ParseSecrets(name string, data []byte) (map[string][]string, error) {
	var raw struct {
		Secrets map[string][]string `toml:"secrets"`
	}
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("%s: [secrets]: %v (each key is a secret's name, its value a list of host names)", name, err)
	}
	out := map[string][]string{}
	for k, hosts := range raw.Secrets {
		if !validSecretName(k) {
			return nil, fmt.Errorf("%s: [secrets]: %q is not an environment variable's name", name, k)
		}
		if len(hosts) == 0 {
			return nil, fmt.Errorf("%s: [secrets]: %s names no host", name, k)
		}
		for _, h := range hosts {
			if err := checkSecretHost(h); err != nil {
				return nil, fmt.Errorf("%s: [secrets]: %s: %v", name, k, err)
			}
		}
		out[k] = hosts
	}
	return out, nil
}

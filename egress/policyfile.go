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

package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Pattern is one entry of an allow or deny list:
//
//	example.com        that name, ports 443 and 80
//	*.example.com      every name below example.com (not example.com itself)
//	example.com:8443   that name and port; "*" as the port means any port
//	10.0.0.0/8         addresses in that range (raw addresses, and names that
//	                   resolve there), ports 443 and 80; "10.0.0.0/8:5432" names a port
//
// A name never matches a raw address and a range never matches a name's
// spelling: a request for an address is judged by ranges only. In a deny list,
// a pattern without a port matches every port.
type Pattern struct {
	// Text is the pattern as written.
	Text string
	// Name is the lower-case name without its "*." when Wildcard; empty for a range.
	Name     string
	Wildcard bool
	// Prefix is the range of a CIDR pattern.
	Prefix netip.Prefix
	// Port is the one port the pattern names; 0 when none was given, -1 for any.
	Port int
}

// ErrPattern marks a malformed pattern.
var ErrPattern = errors.New("bad network pattern")

// ParsePattern reads one pattern.
func ParsePattern(s string) (Pattern, error) {
	text := strings.TrimSpace(s)
	p := Pattern{Text: text}
	host := text
	if i := strings.Index(text, "/"); i >= 0 {
		// A range: the port, if any, follows the mask.
		mask := text[i+1:]
		if j := strings.IndexByte(mask, ':'); j >= 0 {
			port, err := parsePatternPort(mask[j+1:])
			if err != nil {
				return Pattern{}, fmt.Errorf("%w %q: %v", ErrPattern, s, err)
			}
			p.Port = port
			host = text[:i+1+j]
		}
		pre, err := netip.ParsePrefix(strings.Trim(host, "[]"))
		if err != nil {
			return Pattern{}, fmt.Errorf("%w %q: not an address range such as 10.0.0.0/8", ErrPattern, s)
		}
		p.Prefix = pre.Masked()
		return p, nil
	}
	if h, port, ok := splitHostPort(text); ok {
		n, err := parsePatternPort(port)
		if err != nil {
			return Pattern{}, fmt.Errorf("%w %q: %v", ErrPattern, s, err)
		}
		p.Port = n
		host = h
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		// A single address is the range of one.
		a = a.Unmap()
		p.Prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.Wildcard = true
		host = rest
	}
	name, err := canonName(host)
	if err != nil {
		return Pattern{}, fmt.Errorf("%w %q: %v", ErrPattern, s, err)
	}
	p.Name = name
	return p, nil
}

// splitHostPort splits "host:port" and "[v6]:port"; ok is false without a port
// (a bare IPv6 address has colons and no port).
func splitHostPort(s string) (host, port string, ok bool) {
	if strings.HasPrefix(s, "[") {
		i := strings.Index(s, "]:")
		if i < 0 {
			return s, "", false
		}
		return s[:i+1], s[i+2:], true
	}
	if strings.Count(s, ":") != 1 {
		return s, "", false
	}
	i := strings.IndexByte(s, ':')
	return s[:i], s[i+1:], true
}

func parsePatternPort(s string) (int, error) {
	if s == "*" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not 1-65535 or *", s)
	}
	return n, nil
}

// canonName lower-cases a host name, drops a final dot and checks its
// characters: letters, digits, '-', '_' and dots between non-empty labels.
func canonName(s string) (string, error) {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" {
		return "", errors.New("empty host name")
	}
	if len(s) > 253 {
		return "", errors.New("host name longer than 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host name %q has an empty or over-long label", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name %q has the character %q", s, c)
			}
		}
	}
	return s, nil
}

// portMatches says whether the pattern covers port; a pattern without a port
// covers 443 and 80, or every port when anyPort (deny lists).
func (p Pattern) portMatches(port int, anyPort bool) bool {
	switch p.Port {
	case -1:
		return true
	case 0:
		return anyPort || port == 443 || port == 80
	}
	return p.Port == port
}

// matchName says whether the pattern covers the canonical name at port.
func (p Pattern) matchName(name string, port int, anyPort bool) bool {
	if p.Name == "" || !p.portMatches(port, anyPort) {
		return false
	}
	if p.Wildcard {
		return strings.HasSuffix(name, "."+p.Name)
	}
	return name == p.Name
}

// matchAddr says whether the pattern is a range holding a at port.
func (p Pattern) matchAddr(a netip.Addr, port int, anyPort bool) bool {
	return p.Prefix.IsValid() && p.Prefix.Contains(a) && p.portMatches(port, anyPort)
}

// presets are the hosts each tool needs to install packages, nothing more.
// Each is a list of patterns.
var presets = map[string][]string{
	// pip, uv, poetry: the index and the files it links to.
	"python": {"pypi.org", "files.pythonhosted.org"},
	// npm, yarn (classic and berry), pnpm.
	"node": {"registry.npmjs.org", "registry.yarnpkg.com", "repo.yarnpkg.com"},
	// go mod download and GOTOOLCHAIN: the module proxy and the checksum database.
	"go": {"proxy.golang.org", "sum.golang.org"},
	// cargo (the sparse index, crate files) and rustup.
	"rust": {"index.crates.io", "static.crates.io", "crates.io", "static.rust-lang.org"},
	// apt-get, over http and https.
	"debian": {"deb.debian.org", "security.debian.org"},
	// git over https and ssh, the API, archives, release assets, raw files.
	"github": {
		"github.com", "github.com:22", "api.github.com", "codeload.github.com",
		"objects.githubusercontent.com", "raw.githubusercontent.com",
		"release-assets.githubusercontent.com",
	},
}

// Presets lists the names of the presets.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the patterns of a preset.
func Preset(name string) ([]string, bool) {
	p, ok := presets[name]
	return append([]string(nil), p...), ok
}

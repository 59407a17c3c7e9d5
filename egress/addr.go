package egress

import (
	"net"
	"net/netip"
	"strings"
	"sync"
)

// Address classes a name must not resolve to (unless named by Hosts), and that
// a raw address is refused for unless an allowed range holds it.
var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, ...
		netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
		netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
		netip.MustParseAddr("168.63.129.16"),   // Azure wire server
		netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	}
	privateRanges = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("fc00::/7"),      // unique local
	}
	reservedRanges = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("240.0.0.0/4"), // and broadcast
		netip.MustParsePrefix("64:ff9b:1::/48"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
)

// addrClass names why an address is refused, or "" when it is public. The
// result reads after an article (see article).
func addrClass(a netip.Addr, own func(netip.Addr) bool) string {
	a = a.Unmap()
	for _, m := range metadataAddrs {
		if a == m {
			return "cloud metadata address"
		}
	}
	switch {
	case !a.IsValid() || a.IsUnspecified():
		return "unspecified address"
	case a.IsLoopback():
		return "loopback address"
	case a.IsLinkLocalUnicast():
		return "link-local address"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast address"
	}
	if own != nil && own(a) {
		return "address of this host"
	}
	for _, p := range privateRanges {
		if p.Contains(a) {
			return "private address"
		}
	}
	for _, p := range reservedRanges {
		if p.Contains(a) {
			return "reserved address"
		}
	}
	return ""
}

// hostAddrs reports whether an address is one of this host's own, reading the
// interfaces once.
type hostAddrs struct {
	once  sync.Once
	addrs map[netip.Addr]bool
}

func (h *hostAddrs) has(a netip.Addr) bool {
	h.once.Do(func() {
		h.addrs = map[netip.Addr]bool{}
		ifas, err := net.InterfaceAddrs()
		if err != nil {
			return
		}
		for _, ifa := range ifas {
			if n, ok := ifa.(*net.IPNet); ok {
				if x, ok := netip.AddrFromSlice(n.IP); ok {
					h.addrs[x.Unmap()] = true
				}
			}
		}
	})
	return h.addrs[a.Unmap()]
}

// article puts "a" or "an" before a class: "an unspecified address", "an
// address of this host".
func article(class string) string {
	if class != "" && strings.ContainsRune("aeiou", rune(class[0])) {
		return "an " + class
	}
	return "a " + class
}

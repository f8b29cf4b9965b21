package pgsource

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// OnThisHost reports whether every server the connection string names
// runs on this machine: a Unix socket, localhost or this machine's host
// name, a loopback address, or an address of one of its interfaces. Its
// backends then share this machine's cores with the client. A string that
// does not parse is not on this host: Connect reports it.
func OnThisHost(url string) bool {
	cfg, err := parseConfig(url)
	if err != nil {
		return false
	}
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	var own []netip.Addr // read once, when a host needs them
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") || strings.EqualFold(h, "localhost") {
			continue
		}
		if name, err := os.Hostname(); err == nil && strings.EqualFold(h, name) {
			continue
		}
		ip, err := netip.ParseAddr(h)
		if err != nil {
			return false // a name, which only a lookup would place
		}
		ip = ip.Unmap()
		if ip.IsLoopback() {
			continue
		}
		if own == nil {
			own = interfaceAddrs()
		}
		if !slices.Contains(own, ip) {
			return false
		}
	}
	return true
}

// interfaceAddrs lists the addresses of this machine's interfaces, none
// when they cannot be read.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return []netip.Addr{}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

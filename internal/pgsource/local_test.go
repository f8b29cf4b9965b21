package pgsource_test

import (
	"net"
	"testing"

	"github.com/highwater-dev/highwater/internal/pgsource"
)

func TestOnThisHost(t *testing.T) {
	cases := []struct {
		url  string
		want bool
	}{
		{"postgres://u@localhost/db", true},
		{"postgres://u@LocalHost:5433/db", true},
		{"postgres://u@127.0.0.1:5432/db", true},
		{"postgres://u@127.3.4.5/db", true},
		{"postgres://u@[::1]:5432/db", true},
		{"postgres://u@[::ffff:127.0.0.1]/db", true},
		{"host=/var/run/postgresql dbname=db", true},
		{"postgres:///db?host=/tmp", true},
		{"postgres://u@127.0.0.1,localhost/db", true},
		{"postgres://u@192.0.2.1/db", false},           // TEST-NET-1: no interface has it
		{"postgres://u@db.example.com/db", false},      // a name is placed only by a lookup
		{"postgres://u@127.0.0.1,192.0.2.1/db", false}, // one server elsewhere
		{"postgres://u@[2001:db8::1]/db", false},
		{"not a url %%", false},
	}
	// An address of one of this machine's interfaces, when it has one
	// besides loopback.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				cases = append(cases, struct {
					url  string
					want bool
				}{"postgres://u@" + n.IP.String() + "/db", true})
				break
			}
		}
	}
	for _, c := range cases {
		if got := pgsource.OnThisHost(c.url); got != c.want {
			t.Errorf("OnThisHost(%q) = %v, want %v", c.url, got, c.want)
		}
	}
}

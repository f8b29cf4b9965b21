package main

import (
	"runtime"
	"testing"
)

func TestLeaveSourceACore(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	noEnv := &environment{getenv: func(string) string { return "" }}
	withEnv := &environment{getenv: func(k string) string {
		if k == "GOMAXPROCS" {
			return "2"
		}
		return ""
	}}
	cases := []struct {
		name     string
		env      *environment
		url      string
		sessions int
		want     int
	}{
		{"local, one session", noEnv, "postgres://u@127.0.0.1/db", 1, max(1, def-1)},
		{"unix socket, one session", noEnv, "host=/var/run/postgresql dbname=db", 1, max(1, def-1)},
		{"local, several sessions", noEnv, "postgres://u@localhost/db", 2, def},
		{"remote", noEnv, "postgres://u@192.0.2.1/db", 1, def},
		{"GOMAXPROCS set", withEnv, "postgres://u@127.0.0.1/db", 1, def},
	}
	for _, c := range cases {
		// Run from a value that is not the default, as a second command
		// in one process would: the core is left from the default, once.
		start := def + 3
		runtime.GOMAXPROCS(start)
		restore := leaveSourceACore(c.env, c.url, c.sessions)
		got := runtime.GOMAXPROCS(0)
		if c.want == def {
			c.want = start // left as it was
		}
		if got != c.want {
			t.Errorf("%s: GOMAXPROCS %d during the export, want %d (default %d)", c.name, got, c.want, def)
		}
		restore()
		if got := runtime.GOMAXPROCS(0); got != start {
			t.Errorf("%s: GOMAXPROCS %d after, want %d back", c.name, got, start)
		}
	}
}

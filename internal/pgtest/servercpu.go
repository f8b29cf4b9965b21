package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServerCPU measures the CPU time that the backends of a cluster spent:
// the postmaster reaps every backend that exits, and the kernel adds the
// child's user and system time to the postmaster's cutime and cstime. The
// difference over a span, once the backends that ran in it have exited,
// is the server's work in it, whatever the number of connections. It needs
// the cluster on this machine; elsewhere it measures nothing.
type ServerCPU struct {
	conn       *pgx.Conn // a backend of its own, which lives across the span
	postmaster int
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// NewServerCPU starts measuring the cluster of dbURL through a connection
// of its own.
func NewServerCPU(ctx context.Context, dbURL string) (*ServerCPU, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	f, err := procStat(pid)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("read the server's CPU time: %w", err)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("read the server's CPU time: %w", err)
	}
	return &ServerCPU{conn: conn, postmaster: ppid}, nil
}

// Close closes the measuring connection.
func (s *ServerCPU) Close(ctx context.Context) { s.conn.Close(ctx) }

// Reaped returns the CPU time of the backends reaped so far, once every
// backend but its own has exited (or after 10 s).
func (s *ServerCPU) Reaped(ctx context.Context) (time.Duration, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A backend leaves pg_stat_activity before it exits, and the
	// postmaster reaps it some time after: the figure is taken once it
	// has not moved for 300 ms.
	last := time.Duration(-1)
	for {
		cpu, err := s.children()
		if err != nil {
			return 0, err
		}
		if cpu == last || time.Now().After(deadline) {
			return cpu, nil
		}
		last = cpu
		time.Sleep(300 * time.Millisecond)
	}
}

// children is the postmaster's cutime and cstime.
func (s *ServerCPU) children() (time.Duration, error) {
	f, err := procStat(s.postmaster)
	if err != nil {
		return 0, err
	}
	// Fields after the command: state is f[0], so cutime and cstime (16th
	// and 17th of the whole line) are f[13] and f[14].
	var ticks int64
	for _, x := range f[13:15] {
		t, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procStat returns the fields of /proc/<pid>/stat after the command name.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

package pgtest

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

var pg Shared

func TestMain(m *testing.M) { os.Exit(Main(m, &pg)) }

// CreateDatabase replaces a database of the same name, even one a session
// still holds open: a benchmark that ran before left both behind.
func TestCreateDatabaseReplaces(t *testing.T) {
	srv := pg.Server(t)
	ctx := t.Context()
	name := "t_create_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(func() { Exec(t, srv.URL, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u, err := srv.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	Exec(t, u, "CREATE TABLE left_behind (id int)")
	held, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)

	again, err := srv.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatalf("create over a database with an open session: %v", err)
	}
	if again != u {
		t.Errorf("second URL %s, want %s", again, u)
	}
	conn, err := pgx.Connect(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'left_behind'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the table of the first database is still there: the database was not replaced")
	}
}

func TestDatabaseURL(t *testing.T) {
	s := &Server{URL: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"}
	got, err := s.DatabaseURL("bench_1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "postgres://postgres@127.0.0.1:5432/bench_1?sslmode=disable"; got != want {
		t.Errorf("DatabaseURL = %s, want %s", got, want)
	}
}

func TestNewDatabaseRunsSetup(t *testing.T) {
	db := pg.NewDatabase(t, `CREATE TABLE items (id int)`, `INSERT INTO items VALUES (1), (2)`)
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("the setup's table holds %d rows, want the 2 it inserted", n)
	}
}

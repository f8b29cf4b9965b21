// Command lakequery runs one SQL statement in DuckDB over the files that
// `highwater files` printed (read from stdin, one URL a line), exposed as
// the view lake. The demo uses it to show what an analyst sees.
package main

import (
	"bufio"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: highwater files ... | lakequery 'SELECT ... FROM lake'")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "lakequery:", err)
		os.Exit(1)
	}
}

func run(query string) error {
	var files []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			files = append(files, "'"+strings.ReplaceAll(strings.TrimPrefix(line, "file://"), "'", "''")+"'")
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("no files on stdin")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec("SET TimeZone = 'UTC'; CREATE VIEW lake AS SELECT * FROM read_parquet([" + strings.Join(files, ", ") + "], union_by_name = true)"); err != nil {
		return fmt.Errorf("create view: %w", err)
	}
	rows, err := db.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
			if v == nil {
				cells[i] = "NULL"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}

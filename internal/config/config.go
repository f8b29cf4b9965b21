// Package config reads highwater's YAML configuration: one source, one
// destination and any number of models.
//
// Environment variables are expanded in values only, after the YAML is
// parsed: a value can never add keys, lists or comments, whatever it holds.
// The rule is braces only: ${NAME} is the variable (an error when unset),
// ${NAME:-default} the default when it is unset or empty, and $$ is a
// literal $. Any other $ is kept as written, so $1 and dollar-quoted SQL
// ($body$ ... $body$) in a source_query survive; an anonymous $$ quote is
// written $$$$.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"

	"github.com/highwater-dev/highwater/internal/redact"
)

// File is the whole configuration.
type File struct {
	Source string `yaml:"source"`
	// PasswordEnv names the environment variable holding the source's
	// password, which is put into the source URL escaped, so that any
	// password works. PGPASSWORD and ~/.pgpass work without it.
	PasswordEnv string  `yaml:"password_env"`
	Dest        string  `yaml:"dest"`
	Models      []Model `yaml:"models"`
	// Defaults apply to every model that does not set its own.
	Defaults Tuning `yaml:"defaults"`
}

// Model is one exported dataset.
type Model struct {
	Name         string  `yaml:"name"`
	Table        string  `yaml:"table"`
	SourceQuery  string  `yaml:"source_query"`
	PrimaryKey   Columns `yaml:"primary_key"`
	ModifiedAt   string  `yaml:"modified_at"`
	TenantColumn string  `yaml:"tenant_column"`
	Tenant       *string `yaml:"tenant"`
	// SoftDelete names a column that marks rows deleted; DeleteLog reads
	// the delete log installed by `highwater deletes install`. Both make
	// tombstones (docs/deletes.md).
	SoftDelete string `yaml:"soft_delete"`
	DeleteLog  bool   `yaml:"delete_log"`
	// Tenants and TenantsQuery fan the model out: one model instance per
	// tenant, with its own state under the destination's {tenant}.
	// TenantsQuery returns one text column and is run at the start of
	// each command; a tenant no longer returned is left alone.
	Tenants      []string `yaml:"tenants"`
	TenantsQuery string   `yaml:"tenants_query"`
	Tuning       `yaml:",inline"`
}

// Tuning holds the settings that have defaults.
type Tuning struct {
	Lookback       string `yaml:"lookback"`
	TargetFileSize string `yaml:"target_file_size"`
	RowGroupSize   string `yaml:"row_group_size"`
	PageRows       int    `yaml:"page_rows"`
	TimeZone       string `yaml:"time_zone"`
	Compression    string `yaml:"compression"`
	// TableFormat publishes the model in a table format too: "iceberg".
	TableFormat string `yaml:"table_format"`
}

// Columns is a list of column names; one name may be written without
// brackets (primary_key: id).
type Columns []string

// UnmarshalYAML takes a scalar as a list of one.
func (c *Columns) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = Columns{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*c = l
	return nil
}

// Load reads and validates a configuration file.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, os.LookupEnv)
}

// Parse decodes the YAML, expands environment variables in its values
// with lookup (see the package comment), and decodes strictly: unknown keys
// are an error, since a misspelt key silently ignored would export the
// wrong thing. A variable that is not set and has no default is an error
// too: an empty password or host would fail later with a less helpful
// message. No expanded value, default included, is ever part of an error.
func Parse(raw []byte, lookup func(string) (string, bool)) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	ex := expander{lookup: lookup}
	ex.walk(&doc)
	if ex.err != nil {
		return nil, ex.err
	}
	if len(ex.missing) > 0 {
		return nil, fmt.Errorf("config uses environment variables that are not set: %s", strings.Join(ex.missing, ", "))
	}
	// yaml.v3 decodes a node without KnownFields: the expanded tree is
	// encoded again and decoded strictly. Its values are scalars, so
	// nothing in them can become structure.
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		var again yaml.Node
		lines := map[int]int{}
		if yaml.Unmarshal(expanded, &again) == nil {
			lineMap(&doc, &again, lines)
		}
		return nil, decodeError(raw, err, ex.used, lines)
	}
	if f.PasswordEnv != "" {
		pw, ok := lookup(f.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("config: password_env names %s, which is not set", f.PasswordEnv)
		}
		src, err := withPassword(f.Source, pw)
		if err != nil {
			return nil, err
		}
		f.Source = src
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// withPassword puts pw into a postgres:// URL, escaped.
func withPassword(source, pw string) (string, error) {
	u, err := url.Parse(source)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("config: password_env needs source to be a postgres:// URL")
	}
	if _, set := u.User.Password(); set {
		return "", errors.New("config: source holds a password and password_env names another: keep one")
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), nil
}

// expander expands the scalar values of a YAML tree.
type expander struct {
	lookup  func(string) (string, bool)
	missing []string
	used    []string // the variables expanded, named in error messages
	err     error
}

func (e *expander) walk(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		// Keys are never expanded: only values.
		for i := 1; i < len(n.Content); i += 2 {
			e.walk(n.Content[i])
		}
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			e.walk(c)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "$") {
			return
		}
		v, err := e.expand(n.Value)
		if err != nil && e.err == nil {
			e.err = fmt.Errorf("config line %d: %w", n.Line, err)
		}
		if v != n.Value {
			n.Value = v
			// The encoder quotes the value where it must, so it stays
			// one scalar; its type is resolved again, as if written.
			n.Style = 0
			n.Tag = ""
		}
	}
}

// expand applies the braces-only rule to one value.
func (e *expander) expand(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", errors.New("a ${ has no closing }: write $$ for a literal $")
			}
			expr := s[i+2 : i+end]
			name, def, hasDef := strings.Cut(expr, ":-")
			if !validName(name) {
				return "", fmt.Errorf("${%s} is not a variable name: write $$ for a literal $", name)
			}
			v, ok := e.lookup(name)
			switch {
			case hasDef && v == "":
				v = def
			case !ok:
				if !slices.Contains(e.missing, name) {
					e.missing = append(e.missing, name)
				}
			}
			if !slices.Contains(e.used, name) {
				e.used = append(e.used, name)
			}
			b.WriteString(v)
			i += end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// lineRef finds yaml's "line N" references in a message.
var lineRef = regexp.MustCompile(`line \d+`)

// decodeError explains a decode error of the expanded tree without quoting
// an expanded value, which may be a secret: yaml's messages quote the value
// they stumbled on. The file is decoded again as written, each ${VAR} still
// its own name; when that fails on the same lines, its message says the
// same and quotes only the file's text. Otherwise the trouble is in an
// expanded value, and only its line is named. lines maps the lines of the
// re-encoded tree, which yaml's message names, to the file's.
func decodeError(raw []byte, err error, used []string, lines map[int]int) error {
	msg := lineRef.ReplaceAllStringFunc(err.Error(), func(ref string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(ref, "line "))
		if orig, ok := lines[n]; ok {
			n = orig
		}
		return "line " + strconv.Itoa(n)
	})
	if len(used) == 0 {
		return &redact.Error{Msg: "parse config: " + msg, Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var f File
	refs := lineRef.FindAllString(msg, -1)
	nerr := dec.Decode(&f)
	if nerr != nil && slices.Equal(lineRef.FindAllString(nerr.Error(), -1), refs) {
		return &redact.Error{Msg: "parse config: " + nerr.Error(), Err: nerr}
	}
	// The file as written may fail on more lines (a ${VAR} where a number
	// goes): its messages on the lines that failed are still the file's.
	var te *yaml.TypeError
	if errors.As(nerr, &te) {
		var same []string
		for _, e := range te.Errors {
			if slices.Contains(refs, lineRef.FindString(e)) {
				same = append(same, e)
			}
		}
		if len(same) == len(refs) {
			return &redact.Error{Msg: "parse config: yaml: unmarshal errors:\n  " + strings.Join(same, "\n  "), Err: nerr}
		}
	}
	where := "a value"
	if len(refs) > 0 {
		where = strings.Join(slices.Compact(refs), ", ")
	}
	vars := make([]string, len(used))
	for i, v := range used {
		vars[i] = "${" + v + "}"
	}
	return &redact.Error{
		Msg: fmt.Sprintf("parse config: %s: a value taken from the environment (%s) does not fit there: check the variable, or quote it in the file",
			where, strings.Join(vars, ", ")),
		Err: err,
	}
}

// lineMap pairs the nodes of two trees of one shape, the file's and its
// re-encoding's, and maps each line of the second to the line of the first.
func lineMap(orig, again *yaml.Node, m map[int]int) {
	m[again.Line] = orig.Line
	for i := range min(len(orig.Content), len(again.Content)) {
		lineMap(orig.Content[i], again.Content[i], m)
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Validate checks the parts that need no connection.
func (f *File) Validate() error {
	if len(f.Models) == 0 {
		return errors.New("config has no models")
	}
	seen := map[string]bool{}
	for i, m := range f.Models {
		if m.Name == "" {
			return fmt.Errorf("config: model %d has no name", i+1)
		}
		if seen[m.Name] {
			return fmt.Errorf("config: model %q appears twice", m.Name)
		}
		seen[m.Name] = true
		if (m.Table == "") == (m.SourceQuery == "") {
			return fmt.Errorf("config: model %q needs exactly one of table and source_query", m.Name)
		}
		if len(m.PrimaryKey) == 0 || m.ModifiedAt == "" {
			return fmt.Errorf("config: model %q needs primary_key and modified_at", m.Name)
		}
		if err := m.validateTenants(); err != nil {
			return fmt.Errorf("config: model %q: %w", m.Name, err)
		}
		t := f.Defaults.Merge(m.Tuning)
		if _, err := t.LookbackDuration(); err != nil {
			return fmt.Errorf("config: model %q: %w", m.Name, err)
		}
		if _, err := ParseSize(t.TargetFileSize); err != nil {
			return fmt.Errorf("config: model %q: target_file_size: %w", m.Name, err)
		}
		if _, err := ParseSize(t.RowGroupSize); err != nil {
			return fmt.Errorf("config: model %q: row_group_size: %w", m.Name, err)
		}
		if t.TableFormat != "" && t.TableFormat != "iceberg" {
			return fmt.Errorf("config: model %q: table_format %q: the one table format is iceberg", m.Name, t.TableFormat)
		}
		if t.PageRows < 0 {
			return fmt.Errorf("config: model %q: page_rows %d: a page needs at least one row", m.Name, t.PageRows)
		}
		if t.TimeZone != "" {
			if _, err := time.LoadLocation(t.TimeZone); err != nil {
				return fmt.Errorf("config: model %q: time_zone %q is not an IANA time zone", m.Name, t.TimeZone)
			}
		}
	}
	return nil
}

// FansOut says whether the model is one instance per tenant.
func (m *Model) FansOut() bool { return m.Tenants != nil || m.TenantsQuery != "" }

func (m *Model) validateTenants() error {
	ways := 0
	for _, set := range []bool{m.Tenant != nil, m.Tenants != nil, m.TenantsQuery != ""} {
		if set {
			ways++
		}
	}
	switch {
	case ways > 1:
		return errors.New("give one of tenant, tenants and tenants_query")
	case ways == 1 && m.TenantColumn == "":
		return errors.New("tenant, tenants and tenants_query need a tenant_column")
	case ways == 0 && m.TenantColumn != "":
		return errors.New("a tenant_column needs tenant, tenants or tenants_query")
	case m.Tenants != nil && len(m.Tenants) == 0:
		return errors.New("tenants lists no tenant")
	}
	seen := make(map[string]bool, len(m.Tenants))
	for _, t := range m.Tenants {
		if seen[t] {
			return fmt.Errorf("tenant %q is listed twice", t)
		}
		seen[t] = true
		if strings.IndexByte(t, 0) >= 0 {
			return fmt.Errorf("tenant %q holds a NUL byte, which no PostgreSQL text value can", t)
		}
	}
	return nil
}

// Merge returns t with o's non-zero fields taking precedence.
func (t Tuning) Merge(o Tuning) Tuning {
	if o.Lookback != "" {
		t.Lookback = o.Lookback
	}
	if o.TargetFileSize != "" {
		t.TargetFileSize = o.TargetFileSize
	}
	if o.RowGroupSize != "" {
		t.RowGroupSize = o.RowGroupSize
	}
	if o.PageRows != 0 {
		t.PageRows = o.PageRows
	}
	if o.TimeZone != "" {
		t.TimeZone = o.TimeZone
	}
	if o.Compression != "" {
		t.Compression = o.Compression
	}
	if o.TableFormat != "" {
		t.TableFormat = o.TableFormat
	}
	return t
}

// LookbackDuration parses the lookback; -1 means "not set".
func (t Tuning) LookbackDuration() (time.Duration, error) {
	if t.Lookback == "" {
		return -1, nil
	}
	d, err := time.ParseDuration(t.Lookback)
	if err != nil {
		return 0, fmt.Errorf("lookback %q: %w", t.Lookback, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("lookback %q is negative", t.Lookback)
	}
	return d, nil
}

// ParseSize reads "128MiB", "1GB" or a plain byte count; "" is 0.
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	if n == 0 || n > 1<<40 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(n), nil
}

// Package config reads highwater's YAML configuration: one source, one
// destination and any number of models. Environment variables are expanded
// in the file's text before it is parsed, so secrets stay out of it, and
// out of its error messages.
package config

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.yaml.in/yaml/v3"

	"github.com/highwater-dev/highwater/internal/redact"
)

// File is the whole configuration.
type File struct {
	Source string  `yaml:"source"`
	Dest   string  `yaml:"dest"`
	Models []Model `yaml:"models"`
	// Defaults apply to every model that does not set its own.
	Defaults Tuning `yaml:"defaults"`
}

// Model is one exported dataset.
type Model struct {
	Name         string   `yaml:"name"`
	Table        string   `yaml:"table"`
	SourceQuery  string   `yaml:"source_query"`
	PrimaryKey   []string `yaml:"primary_key"`
	ModifiedAt   string   `yaml:"modified_at"`
	TenantColumn string   `yaml:"tenant_column"`
	Tenant       *string  `yaml:"tenant"`
	Tuning       `yaml:",inline"`
}

// Tuning holds the settings that have defaults.
type Tuning struct {
	Lookback       string `yaml:"lookback"`
	TargetFileSize string `yaml:"target_file_size"`
	RowGroupSize   string `yaml:"row_group_size"`
	PageRows       int    `yaml:"page_rows"`
	TimeZone       string `yaml:"time_zone"`
}

// Load reads and validates a configuration file.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, os.LookupEnv)
}

// Parse expands ${VAR} and $VAR with lookup, then decodes strictly:
// unknown keys are an error, since a misspelt key silently ignored would
// export the wrong thing. A variable that is not set is an error too: an
// empty password or host would fail later with a less helpful message.
func Parse(raw []byte, lookup func(string) (string, bool)) (*File, error) {
	var missing, used []string
	expanded := os.Expand(string(raw), func(name string) string {
		v, ok := lookup(name)
		if !ok && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
		return v
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("config uses environment variables that are not set: %s", strings.Join(missing, ", "))
	}
	var f File
	if err := decode(expanded, &f); err != nil {
		return nil, decodeError(raw, err, used)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

func decode(doc string, f *File) error {
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(f)
}

// lineRef finds yaml's "line N" references in a message.
var lineRef = regexp.MustCompile(`line \d+`)

// decodeError explains a decode error without quoting an expanded value,
// which may be a secret: yaml's messages quote the value they stumbled on.
// The file is decoded again with each ${VAR} left as its own name; when that
// fails on the same lines, its message says the same and quotes only the
// file's text. Otherwise the trouble is in an expanded value, and only its
// line is named.
func decodeError(raw []byte, err error, used []string) error {
	if len(used) == 0 {
		return fmt.Errorf("parse config: %w", err)
	}
	named := os.Expand(string(raw), func(name string) string { return "${" + name + "}" })
	var f File
	lines := lineRef.FindAllString(err.Error(), -1)
	if nerr := decode(named, &f); nerr != nil && slices.Equal(lineRef.FindAllString(nerr.Error(), -1), lines) {
		return &redact.Error{Msg: "parse config: " + nerr.Error(), Err: nerr}
	}
	where := "a value"
	if len(lines) > 0 {
		where = strings.Join(slices.Compact(lines), ", ")
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

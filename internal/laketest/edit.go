package laketest

import (
	"encoding/json"
	"os"
	"testing"
)

// EditJSON rewrites the JSON document at path through edit, as a damaged,
// hand-edited or older lake would hold it.
func EditJSON(t *testing.T, path string, edit func(doc map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

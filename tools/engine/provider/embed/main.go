// Writes the two files main.go embeds, from the provider module's
// cmd/pulumi-resource-kubernetes/schema.json and terraform-mapping.json: the schema with its
// "version" set to the provider's release (what upstream's generate.go does), both compacted.
//
//	go run ./embed MODULE_DIR VERSION OUT_DIR
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: embed MODULE_DIR VERSION OUT_DIR")
		os.Exit(2)
	}
	source := filepath.Join(os.Args[1], "cmd", "pulumi-resource-kubernetes")
	version, out := os.Args[2], os.Args[3]

	var schema map[string]json.RawMessage
	read(filepath.Join(source, "schema.json"), &schema)
	quoted, _ := json.Marshal(version)
	schema["version"] = quoted
	write(filepath.Join(out, "schema-embed.json"), schema)

	var mapping json.RawMessage
	read(filepath.Join(source, "terraform-mapping.json"), &mapping)
	var compact bytes.Buffer
	fail(json.Compact(&compact, mapping))
	fail(os.WriteFile(filepath.Join(out, "terraform-mapping-embed.json"), compact.Bytes(), 0o644))
}

func read(path string, into any) {
	contents, err := os.ReadFile(path)
	fail(err)
	fail(json.Unmarshal(contents, into))
}

func write(path string, value any) {
	contents, err := json.Marshal(value)
	fail(err)
	fail(os.WriteFile(path, contents, 0o644))
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

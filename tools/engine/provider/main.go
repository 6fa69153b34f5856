// The Kubernetes provider plugin the engine tests run (pulumi-resource-kubernetes), built from the
// upstream provider module pinned in go.mod. Upstream's own main
// (provider/cmd/pulumi-resource-kubernetes/main.go) embeds schema-embed.json and
// terraform-mapping-embed.json, which its `go generate` writes and the module zip does not carry;
// build.sh generates both here from the zip's schema.json and terraform-mapping.json
// (embed/main.go) before this package compiles. docs/real-engine.md says why.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var schema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}

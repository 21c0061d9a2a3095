package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlsext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// docYAMLBlocks returns the bodies of the ```yaml blocks of a Markdown
// file, in order.
func docYAMLBlocks(t *testing.T, path string) [][]byte {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks [][]byte
	for {
		_, rest, ok := bytes.Cut(doc, []byte("```yaml\n"))
		if !ok {
			return blocks
		}
		body, after, ok := bytes.Cut(rest, []byte("```"))
		require.True(t, ok, "an unclosed yaml block in %s", path)
		blocks, doc = append(blocks, body), after
	}
}

// The Envoy snippet of docs/service.md ("Beside Envoy") is Envoy's v3
// bootstrap: it parses into go-control-plane's Bootstrap with every
// typed_config resolved, no field unknown, and passes the validation
// rules generated from Envoy's protos (ValidateAll), which Envoy applies
// when it loads a configuration. No Envoy binary runs here; this is how
// far the snippet is checked without one. The descriptors its route's
// actions make are then matched against the service configuration that
// follows it in the doc, as serve matches them: each has its limit.
func TestServiceDocEnvoySnippet(t *testing.T) {
	blocks := docYAMLBlocks(t, filepath.Join("..", "..", "docs", "service.md"))
	require.GreaterOrEqual(t, len(blocks), 2, "docs/service.md: the Envoy snippet and the service configuration")

	var tree any
	require.NoError(t, yaml.Unmarshal(blocks[0], &tree))
	js, err := json.Marshal(tree)
	require.NoError(t, err)
	var boot bootstrapv3.Bootstrap
	require.NoError(t, protojson.Unmarshal(js, &boot), "the snippet is not Envoy's v3 Bootstrap")
	require.NoError(t, boot.ValidateAll())

	listeners := boot.GetStaticResources().GetListeners()
	require.Len(t, listeners, 1)
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, listeners[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	var filter ratelimitv3.RateLimit
	require.NoError(t, hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&filter))
	require.Equal(t, "ratelimit", filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName())
	clusters := map[string]bool{}
	for _, c := range boot.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = true
	}
	require.True(t, clusters["ratelimit"], "the filter's cluster is defined")

	conf := filepath.Join(t.TempDir(), "edge.yaml")
	require.NoError(t, os.WriteFile(conf, blocks[1], 0o600))
	cfg, err := loadRLSConfig([]string{conf})
	require.NoError(t, err)

	// The descriptors Envoy makes from the route's actions, for a request
	// from 10.0.0.1 with x-to-number: 555.
	route := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
	want := []struct {
		rate uint32
		per  time.Duration
	}{{10, time.Second}, {5, 24 * time.Hour}}
	require.Len(t, route.GetRateLimits(), len(want))
	for i, rl := range route.GetRateLimits() {
		d := &rlsext.RateLimitDescriptor{}
		for _, a := range rl.GetActions() {
			d.Entries = append(d.Entries, envoyEntry(t, a))
		}
		m := cfg.match(filter.GetDomain(), d)
		require.True(t, m.configured, "descriptor %v has no limit in the doc's configuration", d.GetEntries())
		require.Equal(t, want[i].rate, m.limit.rate, "descriptor %v", d.GetEntries())
		require.Equal(t, want[i].per, m.limit.interval, "descriptor %v", d.GetEntries())
	}
}

// envoyEntry is the descriptor entry Envoy makes from action a for a
// request from 10.0.0.1 whose headers hold every header as 555.
func envoyEntry(t *testing.T, a *routev3.RateLimit_Action) *rlsext.RateLimitDescriptor_Entry {
	t.Helper()
	switch {
	case a.GetRemoteAddress() != nil:
		return &rlsext.RateLimitDescriptor_Entry{Key: "remote_address", Value: "10.0.0.1"}
	case a.GetGenericKey() != nil:
		return &rlsext.RateLimitDescriptor_Entry{Key: a.GetGenericKey().GetDescriptorKey(), Value: a.GetGenericKey().GetDescriptorValue()}
	case a.GetRequestHeaders() != nil:
		return &rlsext.RateLimitDescriptor_Entry{Key: a.GetRequestHeaders().GetDescriptorKey(), Value: "555"}
	}
	t.Fatalf("an action the test does not know: %v", a)
	return nil
}

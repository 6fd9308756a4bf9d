package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/corralcache/corral"
)

// tracingConfig is what `corral serve` is told about traces.
type tracingConfig struct {
	otlpEndpoint string // "" = no tracing
	traceKeys    string // off, hash or raw
	traceUIURL   string // a trace viewer's URL of one trace, with {trace_id}; "" = no links
}

// addTracingFlags binds tracingConfig.
func addTracingFlags(fs *flag.FlagSet, c *tracingConfig) {
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "where OpenTelemetry traces go, OTLP over gRPC: host:port (plaintext unless OTEL_EXPORTER_OTLP_INSECURE=false or a certificate is set in OTEL_EXPORTER_OTLP_*), or an http:// or https:// URL; the SDK's OTEL_* variables apply (OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS, ...), and OTEL_PROPAGATORS says which trace context headers are read and sent to the origin (default tracecontext,baggage) (default: no tracing)")
	fs.StringVar(&c.traceKeys, "trace-keys", "off", "what a span records of a key: off (nothing: a key may be personal data), hash (corral.key.hash, the first 8 bytes of its SHA-256 in hex) or raw (corral.key)")
	fs.StringVar(&c.traceUIURL, "trace-ui-url", "", "a trace viewer's page of one trace, with {trace_id} for its ID, e.g. http://jaeger:16686/trace/{trace_id}: the debug page links each group's slowest recent fill to its trace (needs --otlp-endpoint)")
}

func (c *tracingConfig) validate() error {
	if _, err := c.keys(); err != nil {
		return err
	}
	if c.traceUIURL != "" {
		if c.otlpEndpoint == "" {
			return errors.New("--trace-ui-url needs --otlp-endpoint: without traces there is nothing to link to")
		}
		if !strings.Contains(c.traceUIURL, "{trace_id}") {
			return fmt.Errorf("--trace-ui-url %q has no {trace_id}", c.traceUIURL)
		}
	}
	return nil
}

// keys is --trace-keys as the library's setting.
func (c *tracingConfig) keys() (corral.TraceKeys, error) {
	switch c.traceKeys {
	case "off", "":
		return corral.TraceKeysOff, nil
	case "hash":
		return corral.TraceKeysHash, nil
	case "raw":
		return corral.TraceKeysRaw, nil
	}
	return 0, fmt.Errorf("--trace-keys %q: want off, hash or raw", c.traceKeys)
}

// otlpInsecureSet reports whether the environment says how the OTLP exporter's connection is
// secured: then the SDK's reading of it applies, and --otlp-endpoint's default (plaintext) does
// not.
func otlpInsecureSet(getenv func(string) string) bool {
	for _, v := range []string{"INSECURE", "CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if getenv("OTEL_EXPORTER_OTLP_"+v) != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_"+v) != "" {
			return true
		}
	}
	return false
}

// startTracing returns the TracerProvider that sends the spans of the member called name to
// c.otlpEndpoint, nil without one. Its batches go out in the background; Shutdown flushes
// what is left. The resource is service.name "corral" (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES win), service.instance.id the member's name and service.version
// corral's version.
func startTracing(ctx context.Context, c *tracingConfig, name string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if c.otlpEndpoint == "" {
		return nil, nil
	}
	var opts []otlptracegrpc.Option
	switch ep := c.otlpEndpoint; {
	case strings.HasPrefix(ep, "http://"), strings.HasPrefix(ep, "https://"):
		opts = append(opts, otlptracegrpc.WithEndpointURL(ep)) // the scheme says whether TLS
	default:
		opts = append(opts, otlptracegrpc.WithEndpoint(ep))
		if !otlpInsecureSet(getenv) {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
	}
	// New connects in the background: a collector that is not up yet costs spans, not the
	// start of the node.
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint %q: %w", c.otlpEndpoint, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", "corral"),
			attribute.String("service.instance.id", name),
			attribute.String("service.version", releaseVersion()),
		),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, over the above
	)
	if err != nil && res == nil {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// The sampler is the SDK's default, ParentBased(AlwaysSample), unless OTEL_TRACES_SAMPLER
	// says otherwise; the batches' sizes and delays are OTEL_BSP_*'s.
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// propagatorFromEnv returns how the daemon reads a caller's trace context and writes it to
// the origin: the propagators OTEL_PROPAGATORS names, as the OpenTelemetry SDKs read it
// (tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace or none, comma-separated), and
// W3C trace context with baggage when it is unset. A name it does not know is an error, so
// that a typo stops the node instead of silently breaking every trace.
func propagatorFromEnv(getenv func(string) string) (propagation.TextMapPropagator, error) {
	v := getenv("OTEL_PROPAGATORS")
	var names []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), nil
	}
	p, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return nil, fmt.Errorf("OTEL_PROPAGATORS=%q: %w (want tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace or none, comma-separated)", v, err)
	}
	return p, nil
}

// stopTracing flushes the spans still batched and stops the exporter, within a few seconds.
func stopTracing(tp *sdktrace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("trace export: %w", err)
	}
	return nil
}

// memberName is the name a member gets when none is given — the host's name and a random
// suffix, as corral.New names it — chosen here when the daemon traces, whose spans name the
// member (service.instance.id) before the node exists.
func memberName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "corral"
	}
	var b [4]byte
	crand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// releaseVersion is this binary's release, as versionInfo says it ("corral 0.1.0 (…)").
func releaseVersion() string {
	if f := strings.Fields(versionInfo()); len(f) > 1 {
		return f[1]
	}
	return "dev"
}

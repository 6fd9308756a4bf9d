package origin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/fill"
)

// Origin loads values from an HTTP origin through a URL template with {group} and {key}.
//
// The origin is asked for exactly the key. In the template's path, {group} and {key} are
// path-escaped ("/" as %2F), and a name that would be a dot segment — "." or "..", or one
// with such a segment between "/" or "\" (an origin, or a proxy before it, that decodes
// %2F before it resolves dot segments would climb) — is refused, never sent: the origin's
// "/" page must not be cached under the key "..". In the query ({key} after "?"), they are
// query-escaped, so "&" cannot add a parameter. Redirects are not followed: a 3xx fails the
// fill like any answer but 200 and 404 (502), unless --origin-redirects=same-host, which
// follows up to maxRedirects to the same scheme, host and port.
type Origin struct {
	grace     time.Duration // the groups' stale-while-revalidate, kept with a max-age
	template  string
	client    *http.Client
	maxBytes  int
	queryFrom int // index in template where its query begins; len(template) if none
	// tracer makes each fetch a client span whose trace context the origin gets (traceparent,
	// tracestate); nil = none, and none sent.
	tracer trace.Tracer
	// propagator writes a fetch's trace context (Config.Propagator), when tracer is set.
	propagator propagation.TextMapPropagator
	spanName   string // "GET " and the template's path
}

// maxRedirects bounds the same-host redirects one fill follows.
const maxRedirects = 5

// Values of --origin-redirects.
const (
	RedirectsNone     = "none"
	RedirectsSameHost = "same-host"
)

// Config is what Origin is told.
type Config struct {
	// Template is the origin's URL template (--origin): http or https, with {key} in its path
	// or query, and {group} there too if the origin needs it; never in the host.
	Template string
	// FillTimeout bounds one fetch, retries included (--fill-timeout). Must be positive.
	FillTimeout time.Duration
	// Grace is the groups' stale-while-revalidate (--swr), kept with an origin's max-age.
	Grace time.Duration
	// MaxBytes bounds a body (--max-value-bytes): a longer one fails the fill. Must be positive.
	MaxBytes int
	// Redirects is RedirectsNone (or "") or RedirectsSameHost (--origin-redirects).
	Redirects string
	// TracerProvider, if set, makes every fetch a client span, a child of the fill's, and sends
	// its W3C trace context to the origin (traceparent, tracestate headers). nil = no spans,
	// and no trace headers sent.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into a fetch's headers when it traces
	// (OTEL_PROPAGATORS); nil = W3C trace context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

// New returns the origin of cfg, or an error that says what is wrong with cfg.
func New(cfg Config) (*Origin, error) {
	if cfg.FillTimeout <= 0 || cfg.MaxBytes <= 0 {
		return nil, fmt.Errorf("origin: FillTimeout %v and MaxBytes %d must be positive", cfg.FillTimeout, cfg.MaxBytes)
	}
	template := cfg.Template
	u, err := url.Parse(strings.NewReplacer("{group}", "g", "{key}", "k").Replace(template))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--origin %q: want an http(s) URL template with {key}", template)
	}
	if !strings.Contains(template, "{key}") {
		return nil, fmt.Errorf("--origin %q: the template has no {key}", template)
	}
	// A key must not choose the host it is fetched from.
	host := template[strings.Index(template, "://")+3:]
	if end := strings.IndexAny(host, "/?#"); end >= 0 {
		host = host[:end]
	}
	if strings.Contains(host, "{") {
		return nil, fmt.Errorf("--origin %q: {group} and {key} go in the path or the query, not the host", template)
	}
	var checkRedirect func(*http.Request, []*http.Request) error
	switch cfg.Redirects {
	case RedirectsNone, "":
		checkRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	case RedirectsSameHost:
		checkRedirect = func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			switch {
			case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
				return fmt.Errorf("redirected to another host (%s), not followed (--origin-redirects=same-host)", req.URL.Host)
			case len(via) > maxRedirects:
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		}
	default:
		return nil, fmt.Errorf("--origin-redirects %q: want %s or %s", cfg.Redirects, RedirectsNone, RedirectsSameHost)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64, // one origin host: keep connections for concurrent fills
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: cfg.FillTimeout,
	}
	queryFrom := len(template)
	if i := strings.IndexAny(template, "?#"); i >= 0 {
		queryFrom = i
	}
	o := &Origin{grace: cfg.Grace, template: template, maxBytes: cfg.MaxBytes, queryFrom: queryFrom,
		client: &http.Client{Transport: tr, Timeout: cfg.FillTimeout, CheckRedirect: checkRedirect}}
	if cfg.TracerProvider != nil {
		o.tracer = cfg.TracerProvider.Tracer("github.com/corralcache/corral/cmd/corral/internal/origin")
		o.propagator = cfg.Propagator
		if o.propagator == nil {
			o.propagator = propagation.TraceContext{}
		}
		path := template[strings.Index(template, "://")+3:]
		if i := strings.IndexAny(path, "/?#"); i >= 0 {
			path = path[i:]
		}
		o.spanName = "GET " + path
	}
	return o, nil
}

// errName is wrapped by the error for a group or key the origin cannot be asked for.
var errName = errors.New("cannot be sent to the origin")

// Check refuses a group or key that would be a dot segment of the origin's path: its error
// says why, and Load refuses it too.
func (o *Origin) Check(group, key string) error {
	path := o.template[:o.queryFrom]
	for _, p := range []struct{ what, placeholder, v string }{{"group", "{group}", group}, {"key", "{key}", key}} {
		if strings.Contains(path, p.placeholder) && hasDotSegment(p.v) {
			return fmt.Errorf("%s %q %w: it would be a dot segment of the origin's path, another path than the %s's", p.what, clip.String(p.v, 64), errName, p.what)
		}
	}
	return nil
}

// hasDotSegment reports whether s, split at "/" and "\\", has a segment "." or "..".
func hasDotSegment(s string) bool {
	// Segment by segment, without a slice of them: a Redis protocol GET checks its key here.
	for len(s) > 0 {
		i := strings.IndexAny(s, "/\\")
		seg := s
		if i >= 0 {
			seg, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// url is the origin's URL of key in group: path-escaped in the template's path,
// query-escaped in its query. Check must have passed.
func (o *Origin) url(group, key string) string {
	path := strings.NewReplacer("{group}", url.PathEscape(group), "{key}", url.PathEscape(key)).Replace(o.template[:o.queryFrom])
	query := strings.NewReplacer("{group}", url.QueryEscape(group), "{key}", url.QueryEscape(key)).Replace(o.template[o.queryFrom:])
	return path + query
}

// Load is a group's loader: origin 200 → the body (its Content-Type kept; Cache-Control
// max-age and no-store respected); 404 → corral.ErrNotFound; anything else fails the fill.
func (o *Origin) Load(group string) corral.LoadFunc[objects.Object] {
	return func(ctx context.Context, key string) (objects.Object, error) {
		if err := o.Check(group, key); err != nil {
			return objects.Object{}, err
		}
		var span trace.Span
		if o.tracer != nil {
			ctx, span = o.startSpan(ctx)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url(group, key), nil)
		if err != nil {
			endSpan(span, 0, err)
			return objects.Object{}, err
		}
		if o.tracer != nil {
			o.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
		}
		resp, err := o.do(ctx, req)
		if err != nil {
			endSpan(span, 0, err)
			return objects.Object{}, fmt.Errorf("origin: %w", err)
		}
		defer resp.Body.Close()
		defer endSpan(span, resp.StatusCode, nil)
		switch {
		case resp.StatusCode == http.StatusNotFound:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return objects.Object{}, corral.ErrNotFound
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return objects.Object{}, fmt.Errorf("origin answered %s, a redirect, not followed (--origin-redirects)", resp.Status)
		case resp.StatusCode != http.StatusOK:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return objects.Object{}, fmt.Errorf("origin answered %s", resp.Status)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(o.maxBytes)+1))
		if err != nil {
			return objects.Object{}, fmt.Errorf("origin body: %w", err)
		}
		if len(body) > o.maxBytes {
			return objects.Object{}, fmt.Errorf("origin body exceeds the value limit of %d bytes", o.maxBytes)
		}
		if ct := resp.Header.Get("Content-Type"); len(ct) > objects.MaxTypeBytes {
			return objects.Object{}, fmt.Errorf("origin Content-Type of %d bytes exceeds the limit of %d bytes", len(ct), objects.MaxTypeBytes)
		}
		applyCacheControl(ctx, resp.Header.Get("Cache-Control"), o.grace)
		// The origin's Surrogate-Key tags the entry for DELETE /v1/tags/{tag}; tags past a
		// limit fail the fill with the limit named (502).
		corral.Tag(ctx, objects.Tags(resp.Header)...)
		return objects.Object{Body: body, Type: resp.Header.Get("Content-Type")}, nil
	}
}

// maxAge is the longest max-age kept, in seconds. RFC 9111 (1.2.2) has a cache take a
// delta-seconds larger than it can represent, or whose calculations overflow, as 2^31: a
// larger one multiplied into a Duration would wrap around to any freshness at all.
const maxAge = 1 << 31

// applyCacheControl lets the origin choose the value's freshness: no-store keeps nothing,
// max-age=N (N digits) keeps it fresh for N seconds, at most maxAge. Otherwise the group's
// TTL applies.
func applyCacheControl(ctx context.Context, cc string, grace time.Duration) {
	for _, d := range strings.Split(cc, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		switch {
		case d == "no-store":
			fill.SetExpiry(ctx, 0, 0)
			return
		case strings.HasPrefix(d, "max-age="):
			v := strings.TrimPrefix(d, "max-age=")
			if v == "" || strings.Trim(v, "0123456789") != "" {
				continue // not delta-seconds (1*DIGIT): ignored
			}
			// The only error left is ErrRange, digits past 2^64−1; n is then the largest uint64.
			n, _ := strconv.ParseUint(v, 10, 64)
			fill.SetExpiry(ctx, time.Duration(min(n, maxAge))*time.Second, grace)
		}
	}
}

// dialAttempts bounds how many times a request is tried when its connection could not be
// made, dialRetryWait is the pause between two tries. A failed dial sent nothing, so trying
// again cannot load twice; it rides out a moment in which the origin's address does not answer
// (seen on Docker while containers join its network). The fill timeout bounds them all.
const (
	dialAttempts  = 3
	dialRetryWait = 100 * time.Millisecond
)

// do sends req, again when the connection could not be made, up to dialAttempts times.
func (o *Origin) do(ctx context.Context, req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := o.client.Do(req)
		if err == nil {
			return resp, nil
		}
		err = unwrapURLError(err)
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" || ctx.Err() != nil {
			return nil, err
		}
		if attempt == dialAttempts {
			return nil, fmt.Errorf("%w (%d attempts)", err, attempt)
		}
		t := time.NewTimer(dialRetryWait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

package main

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

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/fill"
)

// origin loads values from an HTTP origin through a URL template with {group} and {key}.
type origin struct {
	grace    time.Duration // the groups' stale-while-revalidate, kept with a max-age
	template string
	client   *http.Client
	maxBytes int
}

func newOrigin(template string, fillTimeout, grace time.Duration, maxBytes int) (*origin, error) {
	u, err := url.Parse(strings.NewReplacer("{group}", "g", "{key}", "k").Replace(template))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--origin %q: want an http(s) URL template with {key}", template)
	}
	if !strings.Contains(template, "{key}") {
		return nil, fmt.Errorf("--origin %q: the template has no {key}", template)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64, // one origin host: keep connections for concurrent fills
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: fillTimeout,
	}
	return &origin{grace: grace, template: template, client: &http.Client{Transport: tr, Timeout: fillTimeout}, maxBytes: maxBytes}, nil
}

func (o *origin) url(group, key string) string {
	return strings.NewReplacer("{group}", url.PathEscape(group), "{key}", url.PathEscape(key)).Replace(o.template)
}

// load is a group's loader: origin 200 → the body (its Content-Type kept; Cache-Control
// max-age and no-store respected); 404 → corral.ErrNotFound; anything else fails the fill.
func (o *origin) load(group string) corral.LoadFunc[object] {
	return func(ctx context.Context, key string) (object, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url(group, key), nil)
		if err != nil {
			return object{}, err
		}
		resp, err := o.do(ctx, req)
		if err != nil {
			return object{}, fmt.Errorf("origin: %w", err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return object{}, corral.ErrNotFound
		case resp.StatusCode != http.StatusOK:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return object{}, fmt.Errorf("origin answered %s", resp.Status)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(o.maxBytes)+1))
		if err != nil {
			return object{}, fmt.Errorf("origin body: %w", err)
		}
		if len(body) > o.maxBytes {
			return object{}, fmt.Errorf("origin body exceeds the value limit of %d bytes", o.maxBytes)
		}
		applyCacheControl(ctx, resp.Header.Get("Cache-Control"), o.grace)
		return object{Body: body, Type: resp.Header.Get("Content-Type")}, nil
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
func (o *origin) do(ctx context.Context, req *http.Request) (*http.Response, error) {
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

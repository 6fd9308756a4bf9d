package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
)

// inspect prints the cluster as one node sees it, and a key's owner.
func inspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "the node's HTTP address, host:port (e.g. after kubectl port-forward)")
	key := fs.String("key", "", "also print the member this node routes the key to")
	group := fs.String("group", "", "with --key: also print what the key's owner holds of it in this group (its lifetime and tags), without filling it")
	asJSON := fs.Bool("json", false, "print the node's JSON as it is")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: corral inspect [--addr host:port] [--key K [--group G]] [--json]

Prints a node's view of the cluster (GET /v1/cluster): its members, their ring shares, the
seeds that turn its joins away and why, and with --key the member it routes K to.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseArgs(fs, args, stdout); err != nil {
		return err
	}
	u := url.URL{Scheme: "http", Host: *addr, Path: "/v1/cluster"}
	if *key != "" {
		u.RawQuery = url.Values{"key": {*key}}.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u.String(), resp.Status, body)
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	var v httpapi.ClusterView
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("%s did not answer with a cluster view: %w", *addr, err)
	}
	if len(v.Members) == 0 {
		return errors.New("the node reports no members")
	}
	fmt.Fprintf(stdout, "node %s sees %d members (epoch %x)\n\n", v.Self, len(v.Members), v.Epoch)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGOSSIP\tPEER\tRING SHARE\t")
	for _, m := range v.Members {
		self := ""
		if m.Name == v.Self {
			self = " (self)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%.1f%%\t\n", m.Name, self, m.GossipAddr, m.PeerAddr, 100*m.Share)
	}
	tw.Flush()
	for _, r := range v.JoinRefusals {
		fmt.Fprintf(stdout, "\njoin refused by seed %s (%s, %s ago): %s\n", r.Seed, r.Reason, time.Since(r.At).Round(time.Second), r.Diagnosis)
	}
	if *key != "" {
		fmt.Fprintf(stdout, "\nkey %q → %s\n", *key, v.Owner)
	}
	if *key != "" && *group != "" {
		return inspectEntry(ctx, *addr, *group, *key, stdout)
	}
	return nil
}

// inspectEntry prints what the key's owner holds of group/key: GET …?peek, which fills
// nothing.
func inspectEntry(ctx context.Context, addr, group, key string, stdout io.Writer) error {
	u := url.URL{Scheme: "http", Host: addr, Path: "/v1/groups/" + group + "/keys/" + key, RawQuery: "peek"}
	u.RawPath = "/v1/groups/" + url.PathEscape(group) + "/keys/" + url.PathEscape(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		fmt.Fprintf(stdout, "%s/%s: not held (the next Get fills it)\n", group, key)
		return nil
	default:
		return fmt.Errorf("%s: %s: %s", u.String(), resp.Status, body)
	}
	tags := resp.Header.Get("Surrogate-Key")
	if tags == "" {
		tags = "(none)"
	}
	fmt.Fprintf(stdout, "%s/%s: %s, %d bytes, fresh for %s, served for %s; tags: %s\n", group, key,
		resp.Header.Get("X-Corral-Source"), len(body), resp.Header.Get("X-Corral-Fresh-For"), resp.Header.Get("X-Corral-Stale-For"), tags)
	return nil
}

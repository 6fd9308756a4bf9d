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
)

// inspect prints the cluster as one node sees it, and a key's owner.
func inspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:8080", "the node's HTTP address, host:port (e.g. after kubectl port-forward)")
	key := fs.String("key", "", "also print the member this node routes the key to")
	asJSON := fs.Bool("json", false, "print the node's JSON as it is")
	if err := fs.Parse(args); err != nil {
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
	var v clusterView
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
	if *key != "" {
		fmt.Fprintf(stdout, "\nkey %q → %s\n", *key, v.Owner)
	}
	return nil
}

package httpapi

import (
	"net/http"
	"testing"
)

func TestHTTPLeases(t *testing.T) {
	td := startTestServer(t, nil)
	const key = "/v1/groups/pages/keys/p42"

	resp, _ := td.do(t, "GET", key+"?lease=5s", "")
	token := resp.Header.Get(LeaseTokenHeader)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(LeaseStateHeader) != "fill" || token == "" {
		t.Fatalf("first lease: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = td.do(t, "GET", key+"?lease=5000", "")
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(LeaseStateHeader) != "busy" || resp.Header.Get(LeaseTokenHeader) != "" {
		t.Fatalf("second lease: %d %v", resp.StatusCode, resp.Header)
	}
	type answer struct {
		status int
		state  string
		body   string
	}
	waiter := make(chan answer, 1)
	go func() {
		resp, body := td.do(t, "GET", key+"?lease=5s&wait=30s", "")
		waiter <- answer{resp.StatusCode, resp.Header.Get(LeaseStateHeader), body}
	}()
	if resp, body := td.do(t, "PUT", key+"?ttl=60s&swr=30s", "<h1>42</h1>", LeaseTokenHeader, token, "Content-Type", "text/html"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT with the lease: %d %s", resp.StatusCode, body)
	}
	if a := <-waiter; a.status != http.StatusOK || a.state != "hit" || a.body != "<h1>42</h1>" {
		t.Fatalf("waiter: %+v", a)
	}
	if resp, _ := td.do(t, "PUT", key+"?ttl=60s", "again", LeaseTokenHeader, token); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT with a used lease: %d", resp.StatusCode)
	}
	if resp, body := td.do(t, "GET", key, ""); resp.StatusCode != http.StatusOK || body != "<h1>42</h1>" || resp.Header.Get("Content-Type") != "text/html" {
		t.Fatalf("plain GET: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// A PUT under a lease after a DELETE answers 409 and changes nothing.
	td.do(t, "DELETE", key, "")
	resp, _ = td.do(t, "GET", key+"?lease=5s", "")
	token = resp.Header.Get(LeaseTokenHeader)
	td.do(t, "DELETE", key, "")
	if resp, _ := td.do(t, "PUT", key+"?ttl=60s", "late", LeaseTokenHeader, token); resp.StatusCode != http.StatusConflict {
		t.Fatalf("PUT after DELETE: %d", resp.StatusCode)
	}
	if resp, _ := td.do(t, "GET", key, ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after the refused PUT: %d", resp.StatusCode)
	}

	// A plain PUT with a ttl of its own.
	if resp, _ := td.do(t, "PUT", "/v1/groups/pages/keys/short?ttl=1h", "x"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT ?ttl: %d", resp.StatusCode)
	}

	for _, q := range []string{"?lease=abc", "?lease=0", "?lease=5s&wait=-1s", "?lease=5s&wait=2h", "?lease=99999999999999999999"} {
		if resp, body := td.do(t, "GET", key+q, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s", q, resp.StatusCode, body)
		}
	}
	if resp, _ := td.do(t, "PUT", key+"?ttl=soon", "x", LeaseTokenHeader, "t"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT ?ttl=soon: %d", resp.StatusCode)
	}
}

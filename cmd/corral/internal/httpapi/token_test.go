package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
)

func TestAPIToken(t *testing.T) {
	for _, reads := range []bool{false, true} {
		t.Run(fmt.Sprint("reads=", reads), func(t *testing.T) {
			td := startTestServer(t, func(c *apiSetup) { c.Token, c.TokenReads = servetest.Token(t, "s3cret"), reads })
			const key = "/v1/groups/g/keys/k"
			for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic s3cret"}, {"Authorization", "Bearer s3cret2"}} {
				resp, _ := td.do(t, "PUT", key, "v", h...)
				if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("PUT with %q: %d %v", h, resp.StatusCode, resp.Header)
				}
			}
			if resp, _ := td.do(t, "DELETE", key, ""); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("DELETE without the token: %d", resp.StatusCode)
			}
			if resp, _ := td.do(t, "GET", key, "", "Authorization", "Bearer s3cret"); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("the refused PUT stored something: %d", resp.StatusCode)
			}
			if resp, _ := td.do(t, "PUT", key, "v", "Authorization", "bearer s3cret"); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("PUT with the token: %d", resp.StatusCode)
			}
			wantRead := http.StatusOK
			if reads {
				wantRead = http.StatusUnauthorized
			}
			for _, p := range []string{key, "/v1/cluster", "/debug/corral"} {
				if resp, _ := td.do(t, "GET", p, ""); resp.StatusCode != wantRead {
					t.Errorf("GET %s without the token: %d, want %d", p, resp.StatusCode, wantRead)
				}
			}
			for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
				if resp, _ := td.do(t, "GET", p, ""); resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s: %d, want open", p, resp.StatusCode)
				}
			}
		})
	}
}

package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node whose seed has another --label or --secret-key-file stays alone and ready (with
// --min-members 1). The seed's log says why; the joiner says it too, where its operator looks:
// a Warn naming the seed and the likely cause, corral_join_refused_total, /v1/cluster's
// join_refusals and `corral inspect`.
func TestServeJoinerNamesTheRefusal(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name, key string) string {
		p := filepath.Join(dir, name+".key")
		if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name         string
		seed, joiner []string
		reason       string
		diagnosis    string
	}{
		{"another label", []string{"--label", "shop"}, []string{"--label", "shop-staging"}, "label", "likely another cluster label"},
		{"another key", []string{"--secret-key-file", keyFile("seed", "0123456789abcdef")},
			[]string{"--secret-key-file", keyFile("joiner", "fedcba9876543210")}, "key", "another gossip key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seed := startNode(t, "seed", nil, tt.seed...)
			joiner := startNode(t, "joiner", []string{seed.Gossip}, tt.joiner...)

			waitFor(t, "the joiner's Warn", 20*time.Second, func() bool {
				return refusalLogged(joiner.log.String(), seed.Gossip, tt.reason)
			})
			if got := metricSum(t, []*proc{joiner}, `corral_join_refused_total{reason="`+tt.reason+`"}`); got < 1 {
				t.Errorf("corral_join_refused_total{reason=%q} = %d on the joiner", tt.reason, got)
			}
			var v struct {
				Members      []json.RawMessage `json:"members"`
				JoinRefusals []struct {
					Seed, Reason, Diagnosis string
				} `json:"join_refusals"`
			}
			_, body := joiner.do(t, "GET", "/v1/cluster", "")
			if err := json.Unmarshal([]byte(body), &v); err != nil {
				t.Fatal(err)
			}
			if len(v.Members) != 1 || len(v.JoinRefusals) != 1 || v.JoinRefusals[0].Seed != seed.Gossip ||
				v.JoinRefusals[0].Reason != tt.reason || !strings.Contains(v.JoinRefusals[0].Diagnosis, tt.diagnosis) {
				t.Errorf("/v1/cluster of the joiner: %s", body)
			}
			out, err := exec.Command(buildCorral(t), "inspect", "--addr", joiner.HTTP).CombinedOutput()
			if err != nil {
				t.Fatalf("corral inspect: %v\n%s", err, out)
			}
			if want := "join refused by seed " + seed.Gossip + " (" + tt.reason + ", "; !strings.Contains(string(out), want) ||
				!strings.Contains(string(out), tt.diagnosis) {
				t.Errorf("corral inspect says\n%s\nwant a line with %q and %q", out, want, tt.diagnosis)
			}
			if joiner.status("/readyz") != http.StatusOK {
				t.Errorf("the joiner is not ready with --min-members 1")
			}
		})
	}
}

// refusalLogged reports whether log, JSON lines, has the Warn of a refused join by seed for
// reason.
func refusalLogged(log, seed, reason string) bool {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if rec["level"] == "WARN" && rec["msg"] == "seed refused this member's join" && rec["seed"] == seed && rec["reason"] == reason {
			return true
		}
	}
	return false
}

package httpapi

import "testing"

func TestDataRoute(t *testing.T) {
	tests := []struct {
		path, route string
		traced      bool
	}{
		{"/v1/groups/g/keys/k", "/v1/groups/{group}/keys/{key}", true},
		{"/v1/groups/g/keys/keys", "/v1/groups/{group}/keys/{key}", true},
		{"/v1/groups/g/keys", "/v1/groups/{group}/keys", true},
		{"/v1/groups/g/keys:batch", "/v1/groups/{group}/keys:batch", true},
		{"/v1/tags/t", "/v1/tags/{tag}", true},
		{"/v1/cluster", "/v1/cluster", true},
		{"/metrics", "", false},
		{"/healthz", "", false},
		{"/debug/corral", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			route, traced := dataRoute(tt.path)
			if route != tt.route || traced != tt.traced {
				t.Errorf("dataRoute(%q) = %q, %v; want %q, %v", tt.path, route, traced, tt.route, tt.traced)
			}
		})
	}
}

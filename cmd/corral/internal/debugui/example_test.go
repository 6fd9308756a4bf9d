package debugui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/corralcache/corral/cmd/corral/internal/debugui"
)

func ExampleHandler() {
	state := func() debugui.State {
		return debugui.State{
			Self:      "a",
			Epoch:     3,
			Ready:     true,
			StartedAt: time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC),
			Members: []debugui.Member{
				{Name: "a", Share: 0.5, Self: true, Status: "alive"},
				{Name: "b", Share: 0.5, Status: "suspect"},
			},
			Groups: []debugui.Group{{Name: "users", Gets: 12, Fills: 1, Coalesced: 11, HotKeys: []string{"user:42"}}},
		}
	}
	ui := debugui.Handler("/debug/corral", state)
	mux := http.NewServeMux()
	mux.Handle("/debug/corral", ui)
	mux.Handle("/debug/corral/", ui)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	page, err := http.Get(srv.URL + "/debug/corral")
	if err != nil {
		panic(err)
	}
	page.Body.Close()
	fmt.Println(page.Header.Get("Content-Type"))

	res, err := http.Get(srv.URL + "/debug/corral/state")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var st debugui.State
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		panic(err)
	}
	for _, m := range st.Members {
		fmt.Printf("%s owns %.0f%% (%s)\n", m.Name, 100*m.Share, m.Status)
	}
	fmt.Println(st.Groups[0].Name, "gets:", st.Groups[0].Gets, "hottest:", st.Groups[0].HotKeys[0])
	// Output:
	// text/html; charset=utf-8
	// a owns 50% (alive)
	// b owns 50% (suspect)
	// users gets: 12 hottest: user:42
}

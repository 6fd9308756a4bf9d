package fill

import (
	"context"
	"testing"
	"time"
)

func TestWriteDuringFillRevokesTheFill(t *testing.T) {
	tests := []struct {
		name  string
		write func(c *Cache[string]) error
		want  string // held after the fill ends; "" = nothing
	}{
		{"Remove", func(c *Cache[string]) error { _, err := c.Remove("k"); return err }, ""},
		{"Set", func(c *Cache[string]) error { _, err := c.Set("k", "written"); return err }, "written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &counting{release: make(chan struct{})}
			c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})
			got := make(chan string, 1)
			go func() { v, _ := c.Get(context.Background(), "k"); got <- v }()
			eventually(t, "fill running", func() bool { return l.runs.Load() == 1 })
			if err := tt.write(c); err != nil {
				t.Fatal(err)
			}
			close(l.release)
			if v := <-got; v != "v:k" { // the fill's waiters still get its value
				t.Fatalf("waiter got %q", v)
			}
			e, ok := c.Peek("k")
			if tt.want == "" && ok {
				t.Fatalf("revoked fill stored %q", e.Value)
			}
			if tt.want != "" && (!ok || e.Value != tt.want) {
				t.Fatalf("held %q, want %q", e.Value, tt.want)
			}
		})
	}
}

func TestGetAfterRemoveStartsANewFill(t *testing.T) {
	l := &counting{release: make(chan struct{})}
	c, _ := newTest(t, l.load, Config[string]{TTL: time.Minute})
	go c.Get(context.Background(), "k")
	eventually(t, "first fill", func() bool { return l.runs.Load() == 1 })
	c.Remove("k")
	done := make(chan struct{})
	go func() { c.Get(context.Background(), "k"); close(done) }()
	eventually(t, "second fill", func() bool { return l.runs.Load() == 2 })
	close(l.release)
	<-done
}

func TestPutKeepsTheNewerVersion(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{})
	ok, _ := c.Put("k", Entry[string]{Value: "v5", FreshFor: time.Second, StaleFor: time.Second, Version: 5})
	if !ok {
		t.Fatal("Put into an empty cache refused")
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "v3", FreshFor: time.Minute, StaleFor: time.Minute, Version: 3}); ok {
		t.Fatal("an older version replaced a newer one")
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "v9", FreshFor: time.Second, StaleFor: 2 * time.Second, Version: 9}); !ok {
		t.Fatal("a newer version was refused")
	}
	e, _ := c.Peek("k")
	if e.Value != "v9" || e.FreshFor != time.Second || e.StaleFor != 2*time.Second {
		t.Fatalf("held %+v", e)
	}
	// Remaining durations, not instants: after 1.5 s the entry is stale with 0.5 s left.
	clk.Advance(1500 * time.Millisecond)
	if e, ok := c.Peek("k"); !ok || e.FreshFor > 0 || e.StaleFor != 500*time.Millisecond {
		t.Fatalf("after 1.5 s: %+v %v", e, ok)
	}
	if ok, _ := c.Put("k", Entry[string]{Value: "dead", StaleFor: 0, Version: 99}); ok {
		t.Fatal("an entry with nothing left was stored")
	}
	if c.RemoveIfOlder("k", 9) || !c.RemoveIfOlder("k", 10) {
		t.Fatal("RemoveIfOlder compared versions wrongly")
	}
}

func TestAllYieldsServableEntries(t *testing.T) {
	c, clk := newTest[string](t, nil, Config[string]{TTL: time.Second})
	c.Set("a", "1")
	clk.Advance(2 * time.Second)
	c.Set("b", "2")
	var keys []string
	for k := range c.All() {
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != "b" {
		t.Fatalf("All = %v", keys)
	}
}

package fill

import (
	"context"
	"testing"
	"time"
)

// A loader that reads another key of a cache bounded to one fill at once runs that nested
// fill on its own slot: it neither waits for the slot it holds (until the fill timeout) nor
// keeps the slot once both fills are done.
func TestNestedFillTakesNoSlot(t *testing.T) {
	fills := NewLimiter(1)
	var c *Replica[string]
	c, _ = newTest(t, func(ctx context.Context, key string) (string, error) {
		if key == "outer" {
			v, err := c.Get(ctx, "inner")
			return "outer(" + v + ")", err
		}
		return "v:" + key, nil
	}, Config[string]{TTL: time.Minute, FillTimeout: 5 * time.Second, Fills: fills})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if v, err := c.Get(ctx, "outer"); err != nil || v != "outer(v:inner)" {
		t.Fatalf("Get(outer) = %q, %v after %v", v, err, time.Since(start))
	}
	if n := fills.InUse(); n != 0 {
		t.Fatalf("%d slots in use after the fills ended, want 0", n)
	}
	// A fill that is not nested still waits for the slot: hold it, and see one wait.
	held, err := fills.AcquireFill(context.Background(), "other", "k")
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if _, err := fills.AcquireFill(short, "other", "k2"); err == nil {
		t.Fatal("a second outermost fill took a slot of a Limiter of one")
	}
	held()
	if n := fills.InUse(); n != 0 {
		t.Fatalf("%d slots in use after release, want 0", n)
	}
}

package doccheck

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/corralcache/corral"
)

// timingRowRE is a row of docs/operations.md's table of timings: | `Field` | default | … |.
var timingRowRE = regexp.MustCompile("^\\|\\s*`(\\w+)`\\s*\\|\\s*([^|]+?)\\s*\\|")

// TestTimingsTable holds docs/operations.md's table of timings equal to
// corral.DefaultConfig: each row's default is the field's, written as Go prints it.
func TestTimingsTable(t *testing.T) {
	r := loadRepo(t)
	rows := firstTable(r.read(t, operationsDoc), "Timings")
	if len(rows) < 3 {
		t.Fatalf("%s has no table under the heading Timings", operationsDoc)
	}
	d := reflect.ValueOf(corral.DefaultConfig())
	seen := 0
	for _, row := range rows[2:] {
		m := timingRowRE.FindStringSubmatch(row)
		if m == nil {
			t.Errorf("%s: a row of the timings that is not | `Field` | default |: %s", operationsDoc, row)
			continue
		}
		f := d.FieldByName(m[1])
		if !f.IsValid() {
			t.Errorf("%s: Config has no field %s", operationsDoc, m[1])
			continue
		}
		seen++
		if got := fmt.Sprint(f.Interface()); got != strings.TrimSpace(m[2]) {
			t.Errorf("%s: %s is %s by default, the table says %s", operationsDoc, m[1], got, m[2])
		}
	}
	if seen == 0 {
		t.Fatal("no timing checked")
	}
}

package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/corralcache/corral/cmd/corral/internal/servetest"
	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// sdssplitargs is Redis's splitter (sds.c, Redis 7), ported line by line over a NUL-terminated
// copy of line, pointer arithmetic as indexes: the dumb version that splitInline is held to.
// ok is false where Redis answers "unbalanced quotes".
func sdssplitargs(line []byte) (args [][]byte, ok bool) {
	s := append(slices.Clone(line), 0)
	p := 0
	isspace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' }
	ishex := func(c byte) bool { return bytes.IndexByte([]byte("0123456789abcdefABCDEF"), c) >= 0 && c != 0 }
	hexval := func(c byte) byte { return byte(bytes.IndexByte([]byte("0123456789abcdef"), c|0x20)) }
	for {
		for s[p] != 0 && isspace(s[p]) {
			p++
		}
		if s[p] == 0 {
			return args, true
		}
		inq, insq, done := false, false, false
		current := []byte{}
		for !done {
			if inq {
				if s[p] == '\\' && s[p+1] == 'x' && ishex(s[p+2]) && ishex(s[p+3]) {
					current = append(current, hexval(s[p+2])*16+hexval(s[p+3]))
					p += 3
				} else if s[p] == '\\' && s[p+1] != 0 {
					p++
					c := s[p]
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					current = append(current, c)
				} else if s[p] == '"' {
					if s[p+1] != 0 && !isspace(s[p+1]) {
						return nil, false
					}
					done = true
				} else if s[p] == 0 {
					return nil, false
				} else {
					current = append(current, s[p])
				}
			} else if insq {
				if s[p] == '\\' && s[p+1] == '\'' {
					p++
					current = append(current, '\'')
				} else if s[p] == '\'' {
					if s[p+1] != 0 && !isspace(s[p+1]) {
						return nil, false
					}
					done = true
				} else if s[p] == 0 {
					return nil, false
				} else {
					current = append(current, s[p])
				}
			} else {
				switch s[p] {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					current = append(current, s[p])
				}
			}
			if s[p] != 0 {
				p++
			}
		}
		args = append(args, current)
	}
}

func TestSplitInline(t *testing.T) {
	tests := []struct {
		line string
		want []string // nil: unbalanced quotes
	}{
		{`SET k v`, []string{"SET", "k", "v"}},
		{"  SET\tk \r v  ", []string{"SET", "k", "v"}},
		{`SET k "hello world"`, []string{"SET", "k", "hello world"}},
		{`SET k 'hello world'`, []string{"SET", "k", "hello world"}},
		{`SET "a b`, nil},
		{`SET 'a b`, nil},
		{`SET k "v"x`, nil},
		{`SET k 'v'x`, nil},
		{`SET k a"b c"`, []string{"SET", "k", "ab c"}},
		{`SET k a"b c"d`, nil},
		{`ECHO "\x41\x4a\x4B\x00z"`, []string{"ECHO", "AJK\x00z"}},
		{`ECHO "\xZZ"`, []string{"ECHO", "xZZ"}},
		{`ECHO "\x4"`, []string{"ECHO", "x4"}},
		{`ECHO "a\nb\rc\td\be\af"`, []string{"ECHO", "a\nb\rc\td\be\af"}},
		{`ECHO "\"q\" \\ \q"`, []string{"ECHO", `"q" \ q`}},
		{`ECHO 'it\'s \n'`, []string{"ECHO", `it's \n`}},
		{`ECHO "" ''`, []string{"ECHO", "", ""}},
		{`ECHO "a\`, nil},
		{"ECHO a\vb \va \"c\"\v", []string{"ECHO", "a\vb", "a", "c"}},
		{"ECHO a\x00b c", []string{"ECHO", "a"}},
		{"ECHO \"a\x00\"", nil},
		{"", []string{}},
		{"   ", []string{}},
	}
	for _, tt := range tests {
		got, err := splitInline([]byte(tt.line), 16)
		switch {
		case tt.want == nil && !errors.Is(err, errUnbalancedQuotes):
			t.Errorf("%q: %q, %v; want unbalanced quotes", tt.line, got, err)
		case tt.want != nil && (err != nil || !slices.Equal(strs(got), tt.want)):
			t.Errorf("%q: %q, %v; want %q", tt.line, got, err, tt.want)
		}
		ref, ok := sdssplitargs([]byte(tt.line))
		if ok != (err == nil) || !slices.Equal(strs(ref), strs(got)) {
			t.Errorf("%q: Redis's splitter gives %q, %v", tt.line, ref, ok)
		}
	}
	if _, err := splitInline([]byte("a b c"), 2); !errors.Is(err, errTooManyInlineArgs) {
		t.Errorf("3 arguments past a bound of 2: %v", err)
	}
}

func strs(bs [][]byte) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, string(b))
	}
	return out
}

// FuzzInlineArgs holds splitInline to Redis's own splitter, byte for byte: the same
// arguments, or unbalanced quotes for both. Its seeds are the cases of the quoting rules.
func FuzzInlineArgs(f *testing.F) {
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := splitInline(line, len(line)+1)
		want, ok := sdssplitargs(line)
		if ok != (err == nil) || !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("%q: %q, %v; Redis's splitter: %q, %v", line, got, err, want, ok)
		}
	})
}

// inlineSeeds are FuzzInlineArgs's seed corpus: each rule of the quoting, and its edges.
func inlineSeeds() []fuzzcorpus.Seed {
	seed := func(name, line string) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(line)}}
	}
	return []fuzzcorpus.Seed{
		seed("words", "SET k v"),
		seed("double-quotes", `SET k "hello world"`),
		seed("single-quotes", `SET k 'it\'s'`),
		seed("unbalanced", `SET "a b`),
		seed("quote-then-text", `SET k "v"x`),
		seed("quote-inside-word", `SET k a"b c"`),
		seed("hex-escapes", `ECHO "\x41\x4a\x4B\xZZ\x4"`),
		seed("control-escapes", `ECHO "a\nb\rc\td\be\af\"\\\q"`),
		seed("backslash-at-end", `ECHO "a\`),
		seed("empty-quotes", `ECHO "" ''`),
		seed("vertical-tab", "ECHO a\vb \va \"c\"\v"),
		seed("nul", "ECHO a\x00b \"c\x00\""),
	}
}

// An inline command with unbalanced quotes is answered as Redis answers it, counted, and its
// connection closed; one that is well quoted reaches the command with its words.
func TestRESPInlineQuotes(t *testing.T) {
	td := startTestServer(t, nil)
	c, err := net.Dial("tcp", td.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := td.limitHits("resp_protocol")
	io.WriteString(c, "SET greeting \"hello world\"\r\nGET greeting\r\nECHO 'it\\'s'\r\nECHO \"\\x41\\n\"\r\nSET \"a b\r\nPING\r\n")
	want := "+OK\r\n" + servetest.Bulk("hello world") + servetest.Bulk("it's") + servetest.Bulk("A\n") +
		"-ERR Protocol error: unbalanced quotes in request\r\n"
	if got := readAll(t, c); got != want {
		t.Fatalf("replies %q, want %q and the connection closed (PING not answered)", got, want)
	}
	if got := td.limitHits("resp_protocol"); got != before+1 {
		t.Errorf("resp_protocol hits grew by %v, want 1", got-before)
	}
	if got := servetest.DialRESP(t, td.addr).Do(t, "GET", "greeting"); got != servetest.Bulk("hello world") {
		t.Errorf("GET greeting = %q: the bad line changed something", got)
	}
}

// An inline command whose first word is an empty quote has no name: it is refused as a
// multibulk command of an empty name is, and the connection is closed.
func TestRESPInlineEmptyName(t *testing.T) {
	td := startTestServer(t, nil)
	c, err := net.Dial("tcp", td.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "PING\r\n\"\" k\r\nPING\r\n")
	want := "+PONG\r\n-ERR Protocol error: empty command name\r\n"
	if got := readAll(t, c); got != want {
		t.Fatalf("replies %q, want %q and the connection closed (the last PING not answered)", got, want)
	}
}

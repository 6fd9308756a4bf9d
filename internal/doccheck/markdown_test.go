package doccheck

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdown is a Markdown file taken apart as far as the checks need: its prose with code
// blanked out (so that a link or a name inside code is not read as one), its code spans and
// shell blocks, and the anchors of its headings.
type markdown struct {
	prose   string   // the text, every character of code replaced by a space: offsets and lines stay
	code    []snip   // inline code spans, and the lines of fenced blocks of shell commands
	anchors []string // GitHub's anchors of the headings, in order, and explicit <a id/name>
}

// snip is a piece of code and the line it starts on (1-based).
type snip struct {
	text string
	line int
}

var (
	fenceRE   = regexp.MustCompile("^ {0,3}(```+|~~~+)\\s*([\\w+-]*)")
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	htmlIDRE  = regexp.MustCompile(`(?i)<a\s+(?:id|name)\s*=\s*"([^"]+)"`)
)

// shellFences are the info strings of fenced blocks whose commands the name check reads.
var shellFences = []string{"sh", "bash", "console", "shell"}

func parseMarkdown(text string) markdown {
	var md markdown
	lines := strings.SplitAfter(text, "\n")
	var b strings.Builder
	var headings []string
	fence, shell := "", false // the open fence's marker, and whether its block is shell
	for i, line := range lines {
		if fence != "" {
			if m := fenceRE.FindStringSubmatch(line); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(line[len(m[0]):]) == "" {
				fence = ""
			} else if shell {
				md.code = append(md.code, snip{text: line, line: i + 1})
			}
			b.WriteString(blank(line))
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			fence, shell = m[1], slices.Contains(shellFences, m[2])
			b.WriteString(blank(line))
			continue
		}
		if m := headingRE.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			headings = append(headings, m[2])
		}
		b.WriteString(line)
	}
	prose := b.String()

	// Code spans: a run of n backticks up to the next run of exactly n; they may cross lines.
	out := []byte(prose)
	for i := 0; i < len(prose); {
		if prose[i] != '`' {
			i++
			continue
		}
		n := runOf(prose, i, '`')
		end := -1
		for j := i + n; j < len(prose); {
			if prose[j] != '`' {
				j++
				continue
			}
			m := runOf(prose, j, '`')
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i += n // a literal run of backticks
			continue
		}
		md.code = append(md.code, snip{text: prose[i+n : end], line: 1 + strings.Count(prose[:i], "\n")})
		copy(out[i:end+n], blank(prose[i:end+n]))
		i = end + n
	}
	md.prose = string(out)

	seen := map[string]int{}
	for _, h := range headings {
		md.anchors = append(md.anchors, uniqueSlug(seen, slug(h)))
	}
	for _, m := range htmlIDRE.FindAllStringSubmatch(md.prose, -1) {
		md.anchors = append(md.anchors, m[1])
	}
	return md
}

func runOf(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// blank replaces every character of s but newlines by a space, byte for byte.
func blank(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c != '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

var mdLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading's text: the rendered text (links' text, code spans'
// code, no emphasis markers) in lower case, every character that is not a letter, digit,
// mark, space, hyphen or underscore dropped, and every space a hyphen.
func slug(heading string) string {
	heading = mdLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// uniqueSlug numbers the second and later headings of one anchor as GitHub does: s-1, s-2, …
func uniqueSlug(seen map[string]int, s string) string {
	n, dup := seen[s]
	seen[s] = n + 1
	if !dup {
		return s
	}
	return s + "-" + strconv.Itoa(n)
}

func TestParseMarkdown(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		wantProse   string
		wantCode    []string
		wantAnchors []string
	}{
		{
			name:      "a code span hides a link",
			text:      "see `[x](nowhere.md)` and [y](there.md)\n",
			wantProse: "see                   and [y](there.md)\n",
			wantCode:  []string{"[x](nowhere.md)"},
		},
		{
			name:      "a code span across lines",
			text:      "run `go test\n-run TestX` now\n",
			wantProse: "run         \n            now\n",
			wantCode:  []string{"go test\n-run TestX"},
		},
		{
			name:      "double backticks hold a single one",
			text:      "a ``x ` y`` b\n",
			wantProse: "a           b\n",
			wantCode:  []string{"x ` y"},
		},
		{
			name:      "an unmatched backtick is literal",
			text:      "a ` b [c](d.md)\n",
			wantProse: "a ` b [c](d.md)\n",
		},
		{
			name:      "shell fences are read, others only blanked",
			text:      "```sh\nmake test # TestA\n```\n```go\nfunc TestB() {}\n```\n",
			wantProse: "     \n                 \n   \n     \n               \n   \n",
			wantCode:  []string{"make test # TestA\n"},
		},
		{
			name:        "headings, duplicates and code in them",
			text:        "# corral\n## Run it as a daemon: `corral serve`\n## What you get\n## What you get\n<a id=\"here\"></a>\n",
			wantCode:    []string{"corral serve"},
			wantAnchors: []string{"corral", "run-it-as-a-daemon-corral-serve", "what-you-get", "what-you-get-1", "here"},
		},
		{
			name:        "a heading inside a fence is no heading",
			text:        "```\n# not a heading\n```\n# Writes under churn\n",
			wantAnchors: []string{"writes-under-churn"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := parseMarkdown(tt.text)
			if tt.wantProse != "" && md.prose != tt.wantProse {
				t.Errorf("prose = %q, want %q", md.prose, tt.wantProse)
			}
			var code []string
			for _, c := range md.code {
				code = append(code, c.text)
			}
			if !slices.Equal(code, tt.wantCode) {
				t.Errorf("code = %q, want %q", code, tt.wantCode)
			}
			if tt.wantAnchors != nil && !slices.Equal(md.anchors, tt.wantAnchors) {
				t.Errorf("anchors = %q, want %q", md.anchors, tt.wantAnchors)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Writes under churn: what holds, and how", "writes-under-churn-what-holds-and-how"},
		{"`make sim`: the simulator", "make-sim-the-simulator"},
		{"Leases — fillers outside Go", "leases--fillers-outside-go"},
		{"[SECURITY.md](SECURITY.md) and limits", "securitymd-and-limits"},
		{"tell / told", "tell--told"},
		{"version clock (HLC)", "version-clock-hlc"},
		{"corral_members_excluded", "corral_members_excluded"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

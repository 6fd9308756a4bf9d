package doccheck

import (
	"fmt"
	"go/scanner"
	"go/token"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corralcache/corral"
)

var (
	// An inline link or image: ](destination "title"), one level of parentheses allowed.
	inlineLinkRE = regexp.MustCompile(`\]\(\s*([^()\s]*(?:\([^()\s]*\)[^()\s]*)*)(?:\s+"[^"]*")?\s*\)`)
	// A link reference definition: [label]: destination
	refDefRE = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)>?`)
	// An HTML link or image.
	htmlRefRE = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*"([^"]*)"`)
	schemeRE  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// link is a link found in a Markdown file.
type link struct {
	target string
	line   int
}

// links returns every link of md's prose, in order.
func (md markdown) links() []link {
	var out []link
	for _, re := range []*regexp.Regexp{inlineLinkRE, refDefRE, htmlRefRE} {
		for _, m := range re.FindAllStringSubmatchIndex(md.prose, -1) {
			out = append(out, link{target: md.prose[m[2]:m[3]], line: 1 + strings.Count(md.prose[:m[2]], "\n")})
		}
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

// checkLink returns what is wrong with a link of the Markdown file from, or "" when it
// resolves inside the repository.
func (r *repo) checkLink(from, target string, anchorsOf func(string) []string) string {
	if target == "" || schemeRE.MatchString(target) {
		return "" // an absolute URL (https:, mailto:): not the repository's to check
	}
	p, frag, _ := strings.Cut(target, "#")
	if strings.HasPrefix(p, "/") {
		return "a link from the root of a site, not relative to the file; write it relative"
	}
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("undecodable path: %v", err)
	}
	dest := from
	if unescaped != "" {
		dest = path.Clean(path.Join(path.Dir(from), unescaped))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "points outside the repository"
		}
		if !r.set[dest] {
			return fmt.Sprintf("%s is not in the repository", dest)
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return "" // anchors into code (#L10) or directories are GitHub's views, not headings
	}
	frag, err = url.PathUnescape(frag)
	if err != nil {
		return fmt.Sprintf("undecodable anchor: %v", err)
	}
	if anchors := anchorsOf(dest); !slices.Contains(anchors, frag) {
		return fmt.Sprintf("%s has no heading with the anchor #%s (it has: %s)", dest, frag, strings.Join(anchors, ", "))
	}
	return ""
}

// TestLinks checks that every relative link of every Markdown file resolves to a file or
// directory of the repository, and each #anchor to a heading of the Markdown file it names.
func TestLinks(t *testing.T) {
	r := loadRepo(t)
	parsed := map[string]markdown{}
	parse := func(f string) markdown {
		md, ok := parsed[f]
		if !ok {
			md = parseMarkdown(r.read(t, f))
			parsed[f] = md
		}
		return md
	}
	anchorsOf := func(f string) []string { return parse(f).anchors }
	docs := r.withSuffix(".md")
	if len(docs) == 0 {
		t.Fatal("no Markdown file found")
	}
	checked := 0
	for _, f := range docs {
		for _, l := range parse(f).links() {
			checked++
			if why := r.checkLink(f, l.target, anchorsOf); why != "" {
				t.Errorf("%s:%d: link %q: %s", f, l.line, l.target, why)
			}
		}
	}
	t.Logf("%d links in %d Markdown files", checked, len(docs))
}

// TestCheckLink holds checkLink to what it must refuse, on this repository's files.
func TestCheckLink(t *testing.T) {
	r := loadRepo(t)
	anchorsOf := func(f string) []string { return parseMarkdown(r.read(t, f)).anchors }
	tests := []struct {
		from, target string
		ok           bool
	}{
		{"README.md", "https://github.com/hashicorp/memberlist", true},
		{"README.md", "docs/design.md", true},
		{"README.md", "docs/design.md#glossary", true},
		{"docs/design.md", "#glossary", true},
		{"docs/design.md", "../charts/corral", true},
		{"docs/design.md", "../fill/doc.go#L1", true},
		{"README.md", "docs/nothing-here.md", false},
		{"README.md", "docs/design.md#no-such-heading", false},
		{"docs/design.md", "#no-such-heading", false},
		{"docs/design.md", "../../outside.md", false},
		{"README.md", "/docs/design.md", false},
	}
	for _, tt := range tests {
		why := r.checkLink(tt.from, tt.target, anchorsOf)
		if (why == "") != tt.ok {
			t.Errorf("checkLink(%s, %q) = %q, want ok=%v", tt.from, tt.target, why, tt.ok)
		}
	}
}

// citation is a kind of text no document or comment may hold.
type citation struct {
	re  *regexp.Regexp
	why string
}

// citations are the references a reader of the repository cannot follow: the project's
// contract and reference notes live outside it, and a path of one machine means nothing on
// another. The patterns are assembled from parts so that this file does not cite them.
var citations = []citation{
	{regexp.MustCompile(`\b` + "DES" + `IGN\b`), "cites the design contract, which is not in the repository (docs/design.md is)"},
	{regexp.MustCompile(`\.\./` + `shared\b|\bshared/` + `reference\b`), "cites notes outside the repository"},
	{regexp.MustCompile(`(?:^|[^\w.~/-])/(?:` + strings.Join([]string{"work", "root", "home", "Users", "tmp"}, "|") + `)/`), "names a path of one machine"},
}

// citationHints are strings of which every citation holds one: a file with none of them
// needs no closer look.
var citationHints = []string{"DES" + "IGN", "shared", "/work/", "/root/", "/home/", "/Users/", "/tmp/"}

// pending are citations in files that are being rewritten elsewhere, each to be dropped from
// this list by the change that fixes it (the test fails on an entry that no longer matches,
// so the list cannot outlive its reason).
var pending = []struct{ file, text string }{}

// TestCitations checks every Markdown file, and every comment of every Go file, for
// citations.
func TestCitations(t *testing.T) {
	r := loadRepo(t)
	used := make([]bool, len(pending))
	report := func(f string, line int, text string) {
		if !strings.ContainsAny(text, "D/") {
			return // every citation has one of them: most lines are done here
		}
		for _, c := range citations {
			if !c.re.MatchString(text) {
				continue
			}
			if i := slices.IndexFunc(pending, func(p struct{ file, text string }) bool {
				return p.file == f && strings.Contains(text, p.text)
			}); i >= 0 {
				used[i] = true
				continue
			}
			t.Errorf("%s:%d: %s: %q", f, line, c.why, strings.TrimSpace(text))
		}
	}
	for _, f := range r.withSuffix(".md") {
		for i, line := range strings.Split(r.read(t, f), "\n") {
			report(f, i+1, line)
		}
	}
	for _, f := range r.withSuffix(".go") {
		src := r.read(t, f)
		if !slices.ContainsFunc(citationHints, func(h string) bool { return strings.Contains(src, h) }) {
			continue // no citation can match anywhere in it, comments included
		}
		fset := token.NewFileSet()
		file := fset.AddFile(f, -1, len(src))
		var s scanner.Scanner
		s.Init(file, []byte(src), nil, scanner.ScanComments) // errors: a test's deliberately broken Go is read as far as it goes
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.COMMENT {
				continue
			}
			first := fset.Position(pos).Line
			for i, line := range strings.Split(lit, "\n") {
				report(f, first+i, line)
			}
		}
	}
	for i, p := range pending {
		if !used[i] {
			t.Errorf("pending citation %q in %s is gone: remove it from the pending list", p.text, p.file)
		}
	}
}

var (
	// A test, fuzz target, benchmark or example; not a placeholder such as <FuzzName>.
	testNameRE = regexp.MustCompile(`(?:^|[^\w<])((?:Test|Fuzz|Benchmark|Example)[A-Z0-9_]\w*)`)
	// A field of corral.Config, written unqualified (corraltest.Config.Nodes is another type).
	configFieldRE = regexp.MustCompile(`(?:^|[^\w.])Config\.([A-Z]\w*)`)
	funcDeclRE    = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
)

// TestNames checks that every test, fuzz target, benchmark or example a Markdown file names in
// its code (code spans and shell blocks) is declared in a _test.go file of the repository, and
// that every Config.Field it names anywhere is a field of corral.Config: a renamed test or
// field must take its documentation along.
func TestNames(t *testing.T) {
	r := loadRepo(t)
	declared := map[string]bool{}
	for _, f := range r.withSuffix("_test.go") {
		for _, m := range funcDeclRE.FindAllStringSubmatch(r.read(t, f), -1) {
			declared[m[1]] = true
		}
	}
	cfg := reflect.TypeFor[corral.Config]()
	for _, f := range r.withSuffix(".md") {
		text := r.read(t, f)
		md := parseMarkdown(text)
		for _, c := range md.code {
			for _, m := range testNameRE.FindAllStringSubmatch(c.text, -1) {
				if !declared[m[1]] {
					t.Errorf("%s:%d: names %s, which no _test.go file declares", f, c.line, m[1])
				}
			}
		}
		for i, line := range strings.Split(text, "\n") {
			for _, m := range configFieldRE.FindAllStringSubmatch(line, -1) {
				if _, ok := cfg.FieldByName(m[1]); !ok {
					t.Errorf("%s:%d: names Config.%s, which corral.Config does not have", f, i+1, m[1])
				}
			}
		}
	}
}

// Package doccheck holds the tests that keep the repository's documentation true; it has no
// API. `make test` runs them with every other package:
//
//  1. Links: every relative link of every Markdown file (inline, reference, image or HTML
//     href/src) names a file or directory of the repository, and every #anchor names a
//     heading of the Markdown file it points into.
//  2. Citations: no Markdown file and no Go comment cites a document that lives outside the
//     repository, or a path of the machine a text was written on.
//  3. Names: every test, fuzz target, benchmark or example a Markdown file names in a code
//     span is declared in some _test.go file, and every Config.Field it names is a field of
//     corral.Config.
//  4. Metrics: the tables of docs/operations.md list exactly the metrics corral registers —
//     names, types and labels read from a live node for the library's, names read from the
//     source for corral serve's — so that neither can change without the other.
package doccheck

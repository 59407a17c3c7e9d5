// Package docscheck checks the project's documentation against the tree:
// every relative link of README.md and docs/ leads to a file that exists and,
// with a #fragment, to one of its headings; every page of docs/ opens with a
// title and a paragraph; and the package map of docs/architecture.md names
// every directory that holds Go files, and no other.
package docscheck

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top, from this package's directory.
const root = "../.."

// pages are README.md and every page of docs/, as paths from root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// prose returns the lines of a markdown file that are neither in a fenced
// nor in an indented code block, with code spans removed, keyed by their
// line number.
func prose(text string) map[int]string {
	out := map[int]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		out[i+1] = codeSpan.ReplaceAllString(line, "")
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`^#{1,6} +(.*?)#*\s*$`)
)

// anchors are the fragments GitHub gives the headings of a markdown file:
// the heading's text in lower case, without punctuation but hyphens and
// underscores, spaces made hyphens, and -1, -2 ... after a repeated one.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var sb strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				sb.WriteRune('-')
			case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Mn, r):
				sb.WriteRune(r)
			}
		}
		a := sb.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// TestLinks: every relative link of README.md and docs/*.md leads to a file
// or directory of the tree, and a fragment to a heading of the page it names.
func TestLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	headings := func(p string) map[string]bool {
		if a, ok := cache[p]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		cache[p] = anchors(string(b))
		return cache[p]
	}
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines := prose(string(b))
		nums := make([]int, 0, len(lines))
		for n := range lines {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		for _, n := range nums {
			for _, m := range link.FindAllStringSubmatch(lines[n], -1) {
				target := m[1]
				checked++
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(page), file))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s:%d: %s leads out of the repository", page, n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
						t.Errorf("%s:%d: %s: no such file", page, n, target)
						continue
					}
				}
				if frag != "" {
					if !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s:%d: %s: a fragment of a file that is not markdown", page, n, target)
					} else if !headings(dest)[frag] {
						t.Errorf("%s:%d: %s: %s has no heading #%s", page, n, target, dest, frag)
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links found: is the link pattern still right?", checked)
	}
	t.Logf("%d links checked", checked)
}

// TestPagesOpen: every page of docs/ starts with its title, then a paragraph
// that says what the page holds.
func TestPagesOpen(t *testing.T) {
	for _, page := range pages(t)[1:] {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "" {
			t.Errorf("%s does not start with a title (# ...) and a blank line", page)
			continue
		}
		p := lines[2]
		if p == "" || strings.HasPrefix(p, "    ") || strings.ContainsAny(p[:1], "#|><") ||
			strings.HasPrefix(p, "- ") || strings.HasPrefix(p, "* ") || strings.HasPrefix(p, "```") {
			t.Errorf("%s: the title is not followed by a paragraph, but by %q", page, p)
		}
	}
}

// TestPackageMap: the tables of docs/architecture.md's package map name every
// directory of the tree that holds Go files (testdata's and other modules'
// included), and each directory they name holds Go files.
func TestPackageMap(t *testing.T) {
	const doc = "docs/architecture.md"
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	_, packages, ok := strings.Cut(string(b), "\n## Packages\n")
	if !ok {
		t.Fatalf("%s has no ## Packages section", doc)
	}
	if i := strings.Index(packages, "\n## "); i >= 0 {
		packages = packages[:i]
	}
	listed := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(packages, -1) {
		listed[m[1]] = true
	}
	have := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			have[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range have {
		if !listed[dir] {
			t.Errorf("%s: the package map has no row for `%s`: add one with the first sentence of its package documentation", doc, dir)
		}
	}
	for dir := range listed {
		if !have[dir] {
			t.Errorf("%s: the package map names `%s`, which holds no Go files", doc, dir)
		}
	}
}

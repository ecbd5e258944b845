package cmd

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestDocumentedCommandsExist reads every edgefleet command line of the README and docs/ (the
// lines of code blocks that start with it, and inline code that does) and checks that the CLI
// has each command and each flag the line gives it: a user who copies a documented line must
// not meet "unknown flag". Usage forms are understood: [optional parts] and a|b alternatives.
func TestDocumentedCommandsExist(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	checked := 0
	for _, file := range files {
		for _, l := range documentedLines(t, file) {
			for _, args := range alternatives(shellWords(l.text)) {
				if msg := checkCommandLine(NewRoot(), args); msg != "" {
					t.Errorf("%s:%d: %s\n\t%s", filepath.Base(file), l.n, msg, l.text)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("found %d documented command lines; the docs have more: is the reader broken?", checked)
	}
	t.Logf("%d documented command lines checked", checked)
}

type docLine struct {
	n    int
	text string // after "edgefleet "
}

var inlineCommand = regexp.MustCompile("`edgefleet ([^`]+)`")

// documentedLines returns the edgefleet command lines of a Markdown file: in code blocks, the
// lines that start with "edgefleet " (or "$ edgefleet "), joined with their "\" continuations,
// without a trailing "# comment"; in prose, the inline code spans that start with it.
func documentedLines(t *testing.T, file string) []docLine {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docLine
	inBlock, n := false, 0
	var cont *docLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
				out = append(out, docLine{n, m[1]})
			}
			continue
		}
		text := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		if cont != nil {
			cont.text += " " + strings.TrimSuffix(text, "\\")
			if !strings.HasSuffix(text, "\\") {
				out, cont = append(out, *cont), nil
			}
			continue
		}
		rest, ok := strings.CutPrefix(text, "edgefleet ")
		if !ok {
			continue
		}
		if i := strings.Index(rest, " #"); i >= 0 && !strings.ContainsAny(rest[:i], `'"`) {
			rest = rest[:i]
		}
		if strings.HasSuffix(rest, "\\") {
			cont = &docLine{n, strings.TrimSuffix(rest, "\\")}
			continue
		}
		out = append(out, docLine{n, rest})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shellWords splits a command line as a POSIX shell does for words in single and double quotes;
// what a shell would do with $, > or | beyond that is not needed here (a word from > on ends
// the line).
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	for i, w := range words {
		if strings.HasPrefix(w, ">") || w == "|" || w == "&&" {
			return words[:i]
		}
	}
	return words
}

// alternatives expands a usage form: brackets are dropped, and a word a|b|c that is no flag
// value gives one line per alternative.
func alternatives(words []string) [][]string {
	lines := [][]string{nil}
	for _, w := range words {
		w = strings.Trim(w, "[]")
		if w == "" || w == "..." {
			continue
		}
		opts := []string{w}
		if strings.Contains(w, "|") && !strings.Contains(w, "=") {
			opts = strings.Split(w, "|")
		}
		var next [][]string
		for _, l := range lines {
			for _, o := range opts {
				next = append(next, append(append([]string(nil), l...), o))
			}
		}
		lines = next
	}
	return lines
}

// checkCommandLine finds the command args name under root and says what is wrong: a word
// where a group of commands wants a subcommand, or a flag the command does not have. "" when
// nothing is.
func checkCommandLine(root *cobra.Command, args []string) string {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err.Error()
	}
	if cmd.HasSubCommands() && !cmd.Runnable() && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return cmd.CommandPath() + " has no subcommand " + rest[0]
	}
	for _, a := range rest {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			if short, isShort := strings.CutPrefix(a, "-"); isShort && short != "" {
				if cmd.Flags().ShorthandLookup(short[:1]) == nil && cmd.InheritedFlags().ShorthandLookup(short[:1]) == nil {
					return cmd.CommandPath() + " has no flag -" + short[:1]
				}
			}
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
			return cmd.CommandPath() + " has no flag --" + name
		}
	}
	return ""
}

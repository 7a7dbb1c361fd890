package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mkbench/mkbench/datasets/fetch"
	"github.com/mkbench/mkbench/internal/runfile"
)

// The rows of `mkbench data` and `mkbench data get` in the command table.
var (
	dataCommand = command{name: "data", synopsis: "what each preset family reads, where mkbench looks for it, and where it is on this machine",
		usage: []string{"data", "data get NAME [--dir DIR] [--from URL|DIR|FILE] [--force]"},
		long: "Lists every preset family (omniglot, cifarfs, miniimagenet, domainnet, embeddings, metadataset, folder, sine): the files it needs, " +
			"the folders mkbench looks in when --data is not given, in order, and the one where it found them, or how to get them. " +
			"mkbench data get downloads the sets whose license allows it.",
		examples: []string{"mkbench data", "mkbench data get omniglot"},
		run:      cmdData}
	dataGetCommand = command{name: "data get", synopsis: "download a data set, checked by SHA-256, into the folder mkbench reads",
		usage: []string{"data get NAME [--dir DIR] [--from URL|DIR|FILE] [--force]"},
		long: "Downloads the canonical files of a data set (omniglot; cifarfs: CIFAR-100) into DIR, by default $MKBENCH_DATA/NAME or ./data/NAME, " +
			"with a progress line on stderr. A file grows in NAME.part and gets its name only once its size and SHA-256 are checked, so nothing " +
			"half-written is ever read; run the same command again to resume a cut download. A file already there with the right checksum is kept; " +
			"one with a wrong checksum is refused, or with --force moved aside to NAME.old. --from takes the files from a mirror (a URL prefix), " +
			"a folder or one file instead, offline when it is local. Sets that need a sign-in (miniImageNet's and Meta-Dataset's images) say where to get them.",
		examples: []string{"mkbench data get omniglot", "mkbench data get omniglot --dir ~/data/omniglot",
			"mkbench data get omniglot --from /media/usb/omniglot", "mkbench data get omniglot --from https://mirror.example.org/omniglot/"},
		run: cmdDataGet}
)

// cmdData lists the families and where their data are (mkbench data), or
// gets one (mkbench data get).
func cmdData(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "get" {
		return cmdDataGet(args[1:], stdout, stderr)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return fail(stderr, fmt.Errorf("data: unknown subcommand %q (mkbench data lists the data sets; mkbench data get NAME fetches one)", args[0]))
	}
	fs := newFlags("data")
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	writeDataList(stdout)
	return 0
}

// writeDataList writes, for each family, what it needs, where mkbench
// looks and what it found there.
func writeDataList(w io.Writer) {
	for i, f := range fetch.Families {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (presets %s)\n", f.Name, f.Presets)
		fmt.Fprintf(w, "  needs     %s\n", f.Needs)
		dirs := f.Dirs()
		switch {
		case len(dirs) > 0:
			fmt.Fprintf(w, "  looks in  --data DIR if given, else %s\n", lookOrder(dirs))
		case f.Manual != "":
			fmt.Fprintln(w, "  looks in  --data DIR only")
		}
		if dir, what, ok := f.Found(); ok {
			// Folder entries come from the disk: escaped for the terminal.
			fmt.Fprintf(w, "  found     %s: %s\n", runfile.Printable(dir), runfile.Printable(what))
			continue
		}
		switch {
		case f.Downloadable():
			fmt.Fprintf(w, "  missing   get it with: mkbench data get %s\n", f.Name)
		case f.Manual != "" && len(dirs) > 0:
			fmt.Fprintf(w, "  missing   %s\n", f.Manual)
		case f.Manual != "":
			fmt.Fprintf(w, "  get       %s\n", f.Manual)
		}
	}
}

// lookOrder writes the folders mkbench tries, in order, as a user reads
// them.
func lookOrder(dirs []string) string {
	if os.Getenv("MKBENCH_DATA") != "" {
		return runfile.Printable(dirs[0]) + " ($MKBENCH_DATA)"
	}
	q := make([]string, len(dirs))
	for i, d := range dirs {
		q[i] = "./" + filepath.ToSlash(d)
		if strings.HasPrefix(d, "..") {
			q[i] = filepath.ToSlash(d)
		}
	}
	return strings.Join(q, ", then ") + " (or $MKBENCH_DATA/" + filepath.Base(dirs[0]) + " alone when MKBENCH_DATA is set)"
}

// cmdDataGet fetches one family's files (mkbench data get NAME).
func cmdDataGet(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("data get")
	dir := fs.String("dir", "", "the folder to put the files in, the one --data names (default: $MKBENCH_DATA/NAME, else ./data/NAME; nothing is fetched when mkbench already finds the set)")
	from := fs.String("from", "", "take the files from here instead of the canonical source: a mirror's URL prefix, a folder holding the same file names, or one of the files (a local copy needs no network)")
	force := fs.Bool("force", false, "move a file in the way whose checksum is wrong aside (to NAME.old) instead of refusing; nothing is deleted")
	name := ""
	name, args = leadingArg(name, args)
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	if name == "" {
		return fail(stderr, fmt.Errorf("data get: name the data set first: mkbench data get NAME [--dir DIR] [--from URL|DIR|FILE] (downloadable: %s; mkbench data lists all)", downloadable()))
	}
	f, err := fetch.Lookup(name)
	if err != nil {
		return fail(stderr, fmt.Errorf("data get: %v", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := fetch.Get(ctx, f, fetch.Options{
		Dir: *dir, From: *from, Force: *force,
		UserAgent: "mkbench/" + version + " (+https://github.com/mkbench/mkbench)",
		Progress:  stderr, TTY: isTerminal(stderr),
	})
	for _, r := range results {
		if r.Aside != "" {
			fmt.Fprintf(stdout, "%s: moved the file that was in the way to %s\n", r.File, runfile.Printable(r.Aside))
		}
		fmt.Fprintf(stdout, "%s: %s (%s, sha256 checked): %s\n", r.File, r.State, runfile.Size(r.Digest.Size), runfile.Printable(r.Path))
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("data get %s: %v", name, err))
	}
	if missing := missingFiles(f, results); missing != "" {
		say(stderr, "note: %s still lacks %s: mkbench data get %s fetches it (or --from it too)", name, missing, name)
		return 0
	}
	placed := filepath.Dir(results[0].Path)
	if found, _, ok := f.Found(); ok && sameDir(found, placed) {
		fmt.Fprintf(stdout, "%s is in %s, where mkbench looks for it\n", name, runfile.Printable(placed))
	} else {
		fmt.Fprintf(stdout, "%s is in %s: pass --data %s to the commands (without it mkbench looks in %s)\n", name, runfile.Printable(placed), runfile.Printable(placed), lookOrder(f.Dirs()))
	}
	return 0
}

// missingFiles names the files of f that results did not place (a --from
// of one file).
func missingFiles(f *fetch.Family, results []fetch.Result) string {
	var m []string
	for _, file := range f.Files {
		got := false
		for _, r := range results {
			got = got || r.File == file.Name
		}
		if !got {
			m = append(m, file.Name)
		}
	}
	return strings.Join(m, " and ")
}

func sameDir(a, b string) bool {
	sa, ea := os.Stat(a)
	sb, eb := os.Stat(b)
	return ea == nil && eb == nil && os.SameFile(sa, sb)
}

// downloadable names the families mkbench can fetch.
func downloadable() string {
	var n []string
	for _, f := range fetch.Families {
		if f.Downloadable() {
			n = append(n, f.Name)
		}
	}
	return strings.Join(n, ", ")
}

package ui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// The folder prompt asks for the images of a folder preset (folder-5w1s,
// folder-5w5s) when no --data was given: the picker's enter on such a
// preset opens it. enter checks the folder with datasets.FolderChannels
// off the UI goroutine; an error stays in the prompt, one line, and a
// folder that passes starts the preset on the dashboard with that folder
// as its data (session.Session.Data) and the channels of its first image
// (the channels override, unless --set channels gave them). esc goes
// back to the picker; every other key but ctrl+c is the folder's text.

// folderKeys are the folder prompt's keys.
type folderKeys struct {
	Start, Back, ForceQuit key.Binding
}

func newFolderKeys() folderKeys {
	return folderKeys{
		Start:     bind("enter", "check the folder and train the preset on it", "enter"),
		Back:      bind("esc", "back to the presets", "esc"),
		ForceQuit: bind("ctrl+c", "quit", "ctrl+c"),
	}
}

// folderPrompt is the folder prompt.
type folderPrompt struct {
	theme     Theme
	keys      folderKeys
	overrides presets.Overrides // the runs', for the sizes the prompt names
	preset    presets.Preset
	input     textinput.Model
	err       string
	checking  string // the folder being checked; "" when none
	gen       int    // counts opens and checks: answers of an earlier one are dropped
	w, h      int
}

// folderCheckedMsg is the answer of a folder check.
type folderCheckedMsg struct {
	gen      int
	dir      string
	channels int
	err      error
}

func newFolderPrompt(t Theme, ov presets.Overrides) *folderPrompt {
	in := textinput.New()
	in.Prompt = "> "
	in.CharLimit = 1024
	in.PlaceholderStyle = t.Dim
	in.Placeholder = "~/pictures/my-classes"
	in.Cursor.SetMode(cursor.CursorStatic)
	in.Focus()
	return &folderPrompt{theme: t, keys: newFolderKeys(), overrides: ov, input: in}
}

// open asks for the folder of preset p, keeping what was typed before.
func (f *folderPrompt) open(p presets.Preset) tea.Cmd {
	f.gen++
	f.preset, f.err, f.checking = p, "", ""
	f.input.CursorEnd()
	return nil
}

// close drops the check in flight.
func (f *folderPrompt) close() { f.gen++; f.checking = "" }

// check checks the folder typed.
func (f *folderPrompt) check() tea.Cmd {
	dir := expandHome(strings.TrimSpace(f.input.Value()))
	if dir == "" {
		f.err = "type the folder that holds your images (one folder per class)"
		return nil
	}
	f.gen++
	f.err, f.checking = "", dir
	gen := f.gen
	return func() tea.Msg {
		n, err := checkFolder(dir)
		return folderCheckedMsg{gen: gen, dir: dir, channels: n, err: err}
	}
}

// checkFolder is the channels of the first image of the folder family in
// dir (datasets.FolderChannels), or why dir is not one.
func checkFolder(dir string) (int, error) {
	if fi, err := os.Stat(dir); err != nil {
		return 0, fmt.Errorf("%s: no such folder", dir)
	} else if !fi.IsDir() {
		return 0, fmt.Errorf("%s is a file: name the folder that holds the class folders", dir)
	}
	return datasets.FolderChannels(dir)
}

// folderGiven starts folder preset p on the folder given with --data,
// with the channels of its first image; a folder that cannot be read
// starts on the preset's channels, and its run then says what is wrong.
func folderGiven(p presets.Preset, dir string) tea.Cmd {
	return func() tea.Msg {
		n, _ := datasets.FolderChannels(dir)
		return pickedMsg{p: p, data: dir, channels: n}
	}
}

// expandHome replaces a leading ~ with the home folder.
func expandHome(dir string) string {
	if dir != "~" && !strings.HasPrefix(dir, "~/") {
		return dir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return dir
	}
	return filepath.Join(home, dir[1:])
}

func (f *folderPrompt) Init() tea.Cmd { return nil }

func (f *folderPrompt) SetSize(w, h int) {
	f.w, f.h = w, h
	f.input.Width = max(w-6, 10)
}

// Update takes the keys (the root has taken esc and ctrl+c) and the
// checks' answers: a folder that passed is picked with its data.
func (f *folderPrompt) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		f.SetSize(msg.Width, msg.Height)
	case folderCheckedMsg:
		if msg.gen != f.gen {
			return f, nil // esc, or a later enter, came first
		}
		f.checking = ""
		if msg.err != nil {
			f.err = strings.TrimPrefix(firstLine(msg.err.Error()), "datasets: ")
			return f, nil
		}
		f.gen++
		p := pickedMsg{p: f.preset, data: msg.dir, channels: msg.channels}
		return f, func() tea.Msg { return p }
	case tea.KeyMsg:
		if key.Matches(msg, f.keys.Start) {
			return f, f.check()
		}
		before := f.input.Value()
		var cmd tea.Cmd
		f.input, cmd = f.input.Update(msg)
		if f.input.Value() != before {
			f.err = "" // it was about the folder typed before
		}
		return f, cmd
	}
	return f, nil
}

// View is the prompt: the folder typed, under it the error or what enter
// does, and the layout the folder needs.
func (f *folderPrompt) View() string {
	w, h := f.w, f.h
	if s, small := tooSmall(w, h); small {
		return s
	}
	t, p := f.theme, f.preset
	right := footer(t, []key.Binding{short(f.keys.Back, "back")}) + " "
	lines := []string{withRight(t.Title.Render(" mkbench ")+t.Dim.Render("│ ")+p.Name+" · your own images", right, w), "",
		t.Bold.Render("  Folder of your images"), "  " + f.input.View()}
	switch {
	case f.err != "":
		lines = append(lines, "  "+t.Err.Render(f.err))
	case f.checking != "":
		lines = append(lines, t.Dim.Render("  checking "+f.checking+" …"))
	default:
		lines = append(lines, t.Dim.Render("  enter checks it and trains "+p.Name+" ("+p.Variant+") on it"))
	}
	_, cfg, err := presets.Spec{Preset: p.Name, Overrides: f.overrides}.Config()
	if err != nil {
		cfg = p.Config
	}
	need := max(cfg.Query, cfg.EvalQuery) + cfg.Shot
	lines = append(lines, "",
		"  One folder per class, each holding its .png or .jpg images, either",
		"    "+pad("DIR/<class>/*.png|jpg", 36)+t.Dim.Render("split 60/20/20 into train, val, test"),
		"    "+pad("DIR/train/<class>/…, val/…, test/…", 36)+t.Dim.Render("your own split (val/ optional)"),
		"",
		t.Dim.Render(fmt.Sprintf("  %d-way %d-shot: train and test need %d classes or more, each of %d images", cfg.Way, cfg.Shot, cfg.Way, need)),
		t.Dim.Render(fmt.Sprintf("  or more (shot + queries). Images are resized to %s; grey ones train", imageSide(cfg.Conv))),
		t.Dim.Render("  on 1 channel, colour ones on 3 (read from the first image)."))
	return block(strings.Join(lines, "\n"), w, h-1) + "\n" + block(footer(t, f.ShortHelp()), w, 1)
}

// imageSide is the model's input size, as "84×84".
func imageSide(c *engine.ConvSpec) string {
	if c == nil {
		return "the model's input size"
	}
	return fmt.Sprintf("%d×%d", c.Width, c.Height)
}

func (f *folderPrompt) ShortHelp() []key.Binding {
	k := f.keys
	return []key.Binding{short(k.Start, "train"), short(k.Back, "back"), short(k.ForceQuit, "quit")}
}

func (f *folderPrompt) FullHelp() [][]key.Binding { return fullHelp(f.HelpGroups()) }

func (f *folderPrompt) HelpGroups() []helpGroup {
	k := f.keys
	return []helpGroup{{"Image folder", []key.Binding{k.Start}}, {"General", []key.Binding{k.Back, k.ForceQuit}}}
}

var (
	_ component  = (*folderPrompt)(nil)
	_ titledHelp = (*folderPrompt)(nil)
)

// navigate: esc goes back to the picker.
func (f *folderPrompt) navigate(msg tea.KeyMsg) tea.Msg {
	if msg.String() == "esc" {
		return backMsg{}
	}
	return nil
}

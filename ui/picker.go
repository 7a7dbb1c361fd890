package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/list"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// The picker is the first screen: a filterable list of presets (bubbles'
// list), then the trained models shipped in mkbench; enter trains the
// selected preset on the dashboard, or opens the selected model.

// pickerKeys are the picker's keys. The list answers Filter itself; it is
// here for the help.
type pickerKeys struct {
	globalKeys
	List          listKeys
	Start, Filter key.Binding
	// Experiments opens the experiments screen with the selected preset.
	Experiments key.Binding
	// Sweep opens the sweep screen, which asks for the directory.
	Sweep key.Binding
	// Runs opens the runs screen.
	Runs key.Binding
	// Device cycles the device the runs started from here train on.
	Device key.Binding
}

func newPickerKeys() pickerKeys {
	return pickerKeys{
		globalKeys: newGlobalKeys(),
		Start:      bind("enter", "train the preset (metakernel; a folder preset asks for its folder first), or open the model", "enter"),
		Filter:     bind("/", "filter presets", "/"),
		List:       newListKeys("entry"),
		// X as on every other screen (x picks a heatmap dimension on the
		// dashboard); x, which nothing else here means, is kept for hands
		// that learnt it.
		Experiments: bind("X", "experiments (ablation, shots, …)", "X", "x"),
		Sweep:       bind("w", "watch a sweep directory (mkbench sweep run)", "w"),
		Runs:        bind("R", "runs: every run under the runs root, to compare, open, resume", "R"),
		Device:      bind("d", "device the runs train on: cpu, each OpenCL device, auto (not while runs train)", "d"),
	}
}

// presetItem shows a preset in the picker's list.
type presetItem struct{ p presets.Preset }

func (i presetItem) Title() string { return i.p.Name }
func (i presetItem) Description() string {
	c := i.p.Config
	return fmt.Sprintf("%s · D=%d d=%d · %d iters", i.p.Description, c.Bases, c.FeatureDim(), c.Iters)
}
func (i presetItem) FilterValue() string { return i.p.Name + " " + i.p.Description }

// modelItem shows a shipped model in the picker's list.
type modelItem struct{ m models.Info }

func (i modelItem) Title() string { return i.m.Name + " · trained model" }
func (i modelItem) Description() string {
	return fmt.Sprintf("test %s · %s iterations in %s of training", i.m.Test.String(), count(i.m.Iters), eta(secondsETA(i.m.TrainSeconds)))
}
func (i modelItem) FilterValue() string { return i.m.Name + " trained model " + i.m.Preset }

// openModelMsg asks the root to open shipped model name.
type openModelMsg struct{ name string }

// picker is the preset picker.
type picker struct {
	theme Theme
	keys  pickerKeys
	list  list.Model
	// askFolder: no --data was given, so a folder preset asks for the
	// folder of its images before it trains.
	askFolder bool
	// opening is the model being opened ("" when none), err why the
	// last one could not be.
	opening, err string
	// dash is the dashboard left with esc (nil before the first pick):
	// its runs train on, and the picker says so.
	dash *dashboard
	// dev is the device runs start on (d cycles it; picker_device.go);
	// busy says what trains, when d must leave it.
	dev  deviceState
	busy busyFunc
	w, h int
}

// pickedMsg says the user chose a preset. A folder preset's pick
// carries the folder of its images (data) and their channels, once the
// folder prompt has them; without data, the root asks for the folder.
type pickedMsg struct {
	p        presets.Preset
	data     string
	channels int // 0: the preset's
}

func newPicker(t Theme, k pickerKeys, all []presets.Preset, shipped []models.Info) *picker {
	var items []list.Item
	for _, p := range all {
		items = append(items, presetItem{p})
	}
	for _, m := range shipped {
		items = append(items, modelItem{m})
	}
	l := list.New(items, list.NewDefaultDelegate(), 0, 0)
	l.Title = "Presets"
	l.SetShowHelp(false)
	l.DisableQuitKeybindings()
	// The picker moves the cursor itself, with the keys every list has
	// (listcursor.go); the list's own paging keys (h/l/u/d, ←/→) go.
	for _, b := range []*key.Binding{&l.KeyMap.CursorUp, &l.KeyMap.CursorDown, &l.KeyMap.PrevPage,
		&l.KeyMap.NextPage, &l.KeyMap.GoToStart, &l.KeyMap.GoToEnd} {
		b.SetEnabled(false)
	}
	if len(shipped) > 0 {
		l.SetStatusBarItemName("entry", "entries")
	} else {
		l.SetStatusBarItemName("preset", "presets")
	}
	for i, it := range items {
		if pi, ok := it.(presetItem); ok && pi.p.Name == "sine-5shot" {
			l.Select(i)
		}
	}
	return &picker{theme: t, keys: k, list: l}
}

// filtering reports whether keys go to the filter input.
func (p *picker) filtering() bool { return p.list.SettingFilter() }

// selected is the preset under the cursor.
func (p *picker) selected() (presets.Preset, bool) {
	it, ok := p.list.SelectedItem().(presetItem)
	return it.p, ok
}

// selectedModel is the shipped model under the cursor.
func (p *picker) selectedModel() (models.Info, bool) {
	it, ok := p.list.SelectedItem().(modelItem)
	return it.m, ok
}

// opened ends the opening of a model; err, if any, shows under the list.
func (p *picker) opened(err error) {
	p.opening, p.err = "", ""
	if err != nil {
		p.err = firstLine(err.Error())
	}
}

func (p *picker) Init() tea.Cmd { return nil }

func (p *picker) SetSize(w, h int) {
	p.w, p.h = w, h
	p.list.SetSize(w, max(h-8, 4))
}

func (p *picker) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.SetSize(msg.Width, msg.Height)
		return p, nil
	case batchMsg, expBatchMsg:
		return p, nil // run data: nothing the picker shows
	case tea.KeyMsg:
		if p.filtering() {
			break
		}
		// The list shows a page at a time: the cursor pages by its
		// height and the list turns to the cursor's page.
		c := listCursor{}.Len(len(p.list.VisibleItems())).Height(p.list.Paginator.PerPage).Select(p.list.Index())
		if c, moved := c.Key(msg, p.keys.List); moved {
			p.list.Select(c.At())
			return p, nil
		}
		if key.Matches(msg, p.keys.Device) && p.dev.chooser != nil {
			busy := p.busy
			if busy == nil {
				busy = func() string { return "" }
			}
			p.dev.cycle(busy)
			return p, nil
		}
		if key.Matches(msg, p.keys.Start) {
			if sel, ok := p.selected(); ok {
				return p, func() tea.Msg { return pickedMsg{p: sel} }
			}
			if m, ok := p.selectedModel(); ok && p.opening == "" {
				p.opening, p.err = m.Name, ""
				return p, func() tea.Msg { return openModelMsg{m.Name} }
			}
		}
	}
	var cmd tea.Cmd
	p.list, cmd = p.list.Update(msg)
	return p, cmd
}

func (p *picker) View() string {
	t := p.theme
	head := p.header()
	detail := ""
	if sel, ok := p.selected(); ok {
		enter := "enter trains the " + sel.Variant + " variant"
		if sel.Source == "folder" && p.askFolder {
			enter = "enter asks for the folder of your images, then trains the " + sel.Variant + " variant"
		}
		detail = t.Bold.Render(sel.Name) + "  " + sel.Summary() + "\n" +
			t.Dim.Render(enter+"; in the dashboard 1-5 add rbf, rff, vrf, vrf+ctx, vrf+cnf beside it")
	}
	if m, ok := p.selectedModel(); ok {
		detail = t.Bold.Render(m.Name) + "  " + modelSummary(m) + "\n" +
			t.Dim.Render("enter opens it: its learning curves and ω panes; X there runs the versatility experiment on it")
	}
	if d := p.dash; d != nil {
		line := fmt.Sprintf("the dashboard's runs of %s have ended; enter trains the preset under the cursor", d.preset.Name)
		if n := len(d.activeViews()); n > 0 {
			line = fmt.Sprintf("the dashboard trains %s (%s) on: enter on %s goes back to it · q stops them with a checkpoint and quits",
				d.preset.Name, plural(n, "run"), d.preset.Name)
		}
		detail = t.Warn.Render(line) + "\n" + detail
	}
	switch {
	case p.opening != "":
		detail = t.Dim.Render("opening model " + p.opening + "… (drawing its ω needs its data set)")
	case p.err != "":
		detail = t.Err.Render(p.err) + "\n" + detail
	}
	if p.dev.note != "" {
		style := t.Dim
		if p.dev.err {
			style = t.Err
		}
		detail = style.Render(p.dev.note) + "\n" + detail
	}
	detail = lipgloss.NewStyle().Width(max(p.w-2, 10)).Render(detail)
	body := p.list.View()
	lines := strings.Count(detail, "\n") + 1
	return block(head+"\n\n"+block(body, p.w, max(p.h-4-lines, 1))+"\n"+detail+"\n"+footer(t, p.ShortHelp()), p.w, p.h)
}

// header is the picker's first line: the workbench's name and, with a
// device chooser, the device the runs train on (its name without its
// platform), the title made short to leave it room on a narrow terminal.
func (p *picker) header() string {
	t := p.theme
	title := t.Title.Render(" mkbench ") + t.Dim.Render("MetaKernel few-shot workbench · pick a preset")
	l := p.dev.label()
	if l == "" {
		return title
	}
	l = runs.DeviceText(l)
	dev := func(room int) string {
		return t.Dim.Render("runs train on ") + t.Bold.Render(cutMiddle(l, max(room, 12))) + t.Dim.Render(" (d) ")
	}
	const words = len("runs train on  (d) ") + 1
	if room := p.w - ansi.StringWidth(title) - words; room >= min(len(l), 24) {
		return withRight(title, dev(room), p.w)
	}
	title = t.Title.Render(" mkbench ") + t.Dim.Render("pick a preset")
	return withRight(title, dev(p.w-ansi.StringWidth(title)-words), p.w)
}

// ShortHelp is the footer.
func (p *picker) ShortHelp() []key.Binding {
	k := p.keys
	bs := []key.Binding{short(k.Start, "train"), short(k.Experiments, "experiments"), short(k.Runs, "runs"), short(k.Sweep, "sweep")}
	if p.dev.chooser != nil {
		bs = append(bs, short(k.Device, "device"))
	}
	return append(bs, short(k.Filter, "filter"), k.Help, short(k.Quit, "quit"))
}

func (p *picker) FullHelp() [][]key.Binding { return fullHelp(p.HelpGroups()) }

func (p *picker) HelpGroups() []helpGroup {
	k := p.keys
	keys := []key.Binding{k.Start, k.Experiments, k.Runs, k.Sweep}
	if p.dev.chooser != nil {
		keys = append(keys, k.Device)
	}
	return []helpGroup{{"Presets", append(append(keys, k.Filter), append(k.List.bindings(), k.Help, k.Quit)...)}}
}

// modelSummary is a shipped model's line: what it was trained as, how
// long, and the choices that differ from its preset.
func modelSummary(m models.Info) string {
	params := fmt.Sprintf("best of %s iterations at %s", count(m.Iters), count(m.BestIter))
	if m.Last {
		params = fmt.Sprintf("last of %s iterations (not validated)", count(m.Iters))
	}
	s := fmt.Sprintf("%s (%s) · %s · %s of training · test %s",
		m.Preset, m.Variant, params, eta(secondsETA(m.TrainSeconds)), m.Test.String())
	if len(m.Settings) > 0 {
		s += " · " + strings.Join(m.Settings, " ")
	}
	return s
}

// navigate: X opens the experiments screen on the preset under the
// cursor, R the runs screen, w the sweep screen; none while filtering.
func (p *picker) navigate(msg tea.KeyMsg) tea.Msg {
	k := p.keys
	switch {
	case p.filtering():
	case key.Matches(msg, k.Experiments):
		preset := ""
		if sel, ok := p.selected(); ok {
			preset = sel.Name
		}
		return openExperimentsMsg{preset: preset}
	case key.Matches(msg, k.Runs):
		return openRunsMsg{}
	case key.Matches(msg, k.Sweep):
		return openSweepMsg{}
	}
	return nil
}

package ui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/list"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/mkbench/mkbench/presets"
)

// presetItem shows a preset in the picker's list.
type presetItem struct{ p presets.Preset }

func (i presetItem) Title() string { return i.p.Name }
func (i presetItem) Description() string {
	c := i.p.Config
	return fmt.Sprintf("%s · D=%d d=%d · %d iters", i.p.Description, c.Bases, c.FeatureDim(), c.Iters)
}
func (i presetItem) FilterValue() string { return i.p.Name + " " + i.p.Description }

// picker is the first screen: a filterable list of presets.
type picker struct {
	theme  Theme
	keys   KeyMap
	list   list.Model
	footer help.Model
	w, h   int
}

// pickedMsg says the user chose a preset.
type pickedMsg struct{ p presets.Preset }

func newPicker(t Theme, k KeyMap, all []presets.Preset) picker {
	var items []list.Item
	for _, p := range all {
		items = append(items, presetItem{p})
	}
	l := list.New(items, list.NewDefaultDelegate(), 0, 0)
	l.Title = "Presets"
	l.SetShowHelp(false)
	l.DisableQuitKeybindings()
	l.SetStatusBarItemName("preset", "presets")
	for i, it := range items {
		if it.(presetItem).p.Name == "sine-5shot" {
			l.Select(i)
		}
	}
	f := help.New()
	f.Styles.ShortKey, f.Styles.ShortDesc, f.Styles.ShortSeparator = t.Key, t.Dim, t.Dim
	return picker{theme: t, keys: k, list: l, footer: f}
}

// filtering reports whether keys go to the filter input.
func (p picker) filtering() bool { return p.list.SettingFilter() }

func (p picker) update(msg tea.Msg) (picker, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.w, p.h = msg.Width, msg.Height
		p.list.SetSize(msg.Width, max(msg.Height-8, 4))
		return p, nil
	case tea.KeyMsg:
		if !p.filtering() && key.Matches(msg, p.keys.Start) {
			if it, ok := p.list.SelectedItem().(presetItem); ok {
				return p, func() tea.Msg { return pickedMsg{it.p} }
			}
		}
	}
	var cmd tea.Cmd
	p.list, cmd = p.list.Update(msg)
	return p, cmd
}

func (p picker) view() string {
	t := p.theme
	head := t.Title.Render(" mkbench ") + t.Dim.Render("MetaKernel few-shot workbench · pick a preset")
	detail := ""
	if it, ok := p.list.SelectedItem().(presetItem); ok {
		detail = t.Bold.Render(it.p.Name) + "  " + it.p.Summary() + "\n" +
			t.Dim.Render("enter trains the "+it.p.Variant+" variant; in the dashboard 1-5 add rbf, rff, vrf, vrf+ctx, vrf+cnf beside it")
	}
	detail = lipgloss.NewStyle().Width(max(p.w-2, 10)).Render(detail)
	foot := " " + p.footer.ShortHelpView(p.keys.PickerShortHelp())
	body := p.list.View()
	lines := strings.Count(detail, "\n") + 1
	return block(head+"\n\n"+block(body, p.w, max(p.h-4-lines, 1))+"\n"+detail+"\n"+foot, p.w, p.h)
}

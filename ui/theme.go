package ui

import (
	"github.com/charmbracelet/bubbles/progress"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/mkbench/mkbench/internal/runstate"
)

// Theme holds the styles of one output. Mono is set when the output takes
// no colour (NO_COLOR, or not a colour terminal): overlaid curves are then
// told apart by their marker runes instead of their colours.
type Theme struct {
	r    *lipgloss.Renderer
	Mono bool

	Title, Dim, Bold, Warn, Err, Key lipgloss.Style
	Pane, PaneFocus                  lipgloss.Border
	PaneColor, FocusColor            lipgloss.Color
	Tab, TabActive                   lipgloss.Style
	Axis, Label                      lipgloss.Style
	Truth, Band, Support             lipgloss.Style
	HelpBox                          lipgloss.Style

	series  []lipgloss.Style
	heat    []lipgloss.Color
	barFill lipgloss.Color
}

// accent marks keys, the focused pane and progress bars.
const accent = lipgloss.Color("#ff5f87")

var seriesColors = []lipgloss.Color{"#7aa2f7", "#e0af68", "#9ece6a", "#bb9af7", "#7dcfff", "#ff5f87"}

// seriesMarkers stand in for colours in mono mode.
var seriesMarkers = []rune{'o', '+', 'x', '#', '%', '*'}

// NewTheme builds the styles for renderer r (lipgloss.DefaultRenderer()
// for the terminal). NO_COLOR is honoured through r's colour profile.
func NewTheme(r *lipgloss.Renderer) Theme {
	t := Theme{r: r, Mono: r.ColorProfile() == termenv.Ascii}
	ns := r.NewStyle
	t.Title = ns().Bold(true)
	t.Dim = ns().Foreground(lipgloss.Color("#777777"))
	t.Bold = ns().Bold(true)
	t.Warn = ns().Foreground(lipgloss.Color("#e0af68")).Bold(true)
	t.Err = ns().Foreground(lipgloss.Color("#f7768e")).Bold(true)
	t.Key = ns().Foreground(accent).Bold(true)
	t.Pane, t.PaneColor = lipgloss.RoundedBorder(), lipgloss.Color("#444444")
	t.PaneFocus, t.FocusColor = lipgloss.ThickBorder(), accent
	t.Tab = ns().Padding(0, 1).Foreground(lipgloss.Color("#999999"))
	t.TabActive = ns().Padding(0, 1).Bold(true).Reverse(true)
	t.Axis = ns().Foreground(lipgloss.Color("#555555"))
	t.Label = ns().Foreground(lipgloss.Color("#888888"))
	t.Truth = ns().Foreground(lipgloss.Color("#c0caf5"))
	t.Band = ns().Foreground(lipgloss.Color("#3b4261"))
	t.Support = ns().Foreground(lipgloss.Color("#ffffff")).Bold(true)
	t.HelpBox = ns().Border(lipgloss.RoundedBorder()).BorderForeground(accent).Padding(0, 1)
	for _, c := range seriesColors {
		t.series = append(t.series, ns().Foreground(c))
	}
	t.heat = []lipgloss.Color{"#1a1b26", "#24283b", "#2f3b6b", "#3d59a1", "#7aa2f7", "#7dcfff", "#c0f0ff"}
	t.barFill = lipgloss.Color("#7aa2f7")
	return t
}

// variantIndex is v's place among the toggles, which fixes its colour and
// marker in every pane.
func variantIndex(v string) int {
	for i, n := range toggleVariants {
		if n == v {
			return i
		}
	}
	return len(toggleVariants) - 1
}

// Series is the style of curve number i (a variantIndex).
func (t Theme) Series(i int) lipgloss.Style { return t.series[i%len(t.series)] }

// Marker is the rune that tells curve i apart without colour.
func (t Theme) Marker(i int) rune { return seriesMarkers[i%len(seriesMarkers)] }

// Swatch is the legend mark of curve i: a coloured line, or its marker.
func (t Theme) Swatch(i int) string {
	if t.Mono {
		return string(t.Marker(i))
	}
	return t.Series(i).Render("━━")
}

// bar is a progress bar w columns wide, filled to frac.
func (t Theme) bar(w int, frac float64) string {
	return progress.New(progress.WithSolidFill(string(accent)), progress.WithoutPercentage(),
		progress.WithWidth(w), progress.WithColorProfile(t.r.ColorProfile())).ViewAs(frac)
}

// stateStyle colours a run's state (runstate) in the runs and sweep
// tables; without colour the word says it. A run that could not be read
// has none ("").
func stateStyle(t Theme, state string) lipgloss.Style {
	switch state {
	case runstate.Finished:
		return t.Series(2)
	case runstate.Running:
		return t.Key
	case runstate.Failed, "":
		return t.Err
	}
	return t.Dim
}

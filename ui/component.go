package ui

import (
	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
)

// component is one part of the workbench that fills the window: the
// preset picker, the dashboard, the experiments screen and the help
// overlay, as soft-serve's common.Component. It is a bubbletea model
// that draws itself at the size SetSize last gave it, and its help.KeyMap
// names the keys it answers to: ShortHelp is what its footer or header
// shows, FullHelp its page of the help overlay (with titles: titledHelp).
//
// The root model (model.go) sends window sizes and run data to every
// component and keys only to the one showing; a component ignores the
// messages that are not its own.
type component interface {
	tea.Model
	help.KeyMap
	SetSize(width, height int)
}

var (
	_ component = (*picker)(nil)
	_ component = (*dashboard)(nil)
	_ component = (*expScreen)(nil)
	_ component = (*helpOverlay)(nil)

	_ titledHelp = (*picker)(nil)
	_ titledHelp = (*dashboard)(nil)
	_ titledHelp = (*expScreen)(nil)
)

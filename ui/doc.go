// Package ui holds the terminal workbench's views (bubbletea v1, lipgloss
// v1, bubbles v1, ntcharts v0.5). It only draws: training runs in the
// engine, which reports to the UI through engine.Observer snapshots.
//
// The views arrive with the TUI issue; until then `mkbench` without
// arguments trains headless.
package ui

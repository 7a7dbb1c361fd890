// Package presets names ready-made experiment configurations: a task
// family plus a complete engine.Config. Command-line flags override preset
// fields; a preset never leaves a field at a meaningless zero.
package presets

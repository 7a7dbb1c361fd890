// Package presets names ready-made experiment configurations: a task
// family plus a complete engine.Config. Command-line flags override preset
// fields; a preset never leaves a field at a meaningless zero.
//
// presets.go holds the presets and NewSources, the task sources of a
// family; metadataset.go the Meta-Dataset presets and sources; spec.go the
// settings a run overrides by key; diff.go ConfigDiff, the settings two
// configs differ in. The sub-package models holds trained models.
package presets

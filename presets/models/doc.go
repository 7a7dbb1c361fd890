// Package models holds trained models: those shipped in the binary (the
// folder shipped/, embedded) and any folder of them a user exports
// (`mkbench models export`). A model is a folder holding model.mkbm
// (engine.ModelFile: the parameters in float32 with the config),
// model.json (Info: its test result, training time and iterations, the
// settings that made it) and the run's learning curves, metrics.jsonl and
// val.jsonl. A Library reads one set of them; Materialize turns a model
// back into a run directory for whatever reads runs.
package models

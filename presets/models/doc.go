// Package models holds trained models: those shipped in the binary (the
// folder shipped/, embedded) and any folder of them a user exports
// (`mkbench models export`). A model is a folder holding model.mkbm
// (engine.ModelFile: the parameters in float32 with the config),
// model.json (Info: its test result, training time and iterations, the
// settings that made it) and the run's learning curves, metrics.jsonl and
// val.jsonl. A Library reads one set of them (a damaged model is named,
// the others listed all the same; a model.mkbm past MaxModelBytes is not
// read); Materialize turns a model back into a run directory for whatever
// reads runs. Both Export and Materialize write a folder whole or not at
// all: into a hidden sibling renamed into place under the parent folder's
// lock, an existing model replaced only on request and kept until the new
// one is in place.
package models

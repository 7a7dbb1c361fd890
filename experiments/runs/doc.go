// Package runs finds the run directories under a runs root — single runs,
// the runs of experiments and the units of sweeps, and the shipped models
// written out as runs — and reads what each says of itself: preset,
// variant, seed, progress, state, final metric, training time and age.
// The workbench's runs screen and `mkbench runs` are built on it.
//
// Finding is cheap (directory listings only) and reading a run costs a
// few small files (config.json, summary.json, the tails of metrics.jsonl
// and val.jsonl), so a screen can list a thousand runs at once and fill
// their details in as they are read (Find, then Read per entry). No file
// is read past its ceiling (internal/runfile's): a run whose config.json or
// summary.json is larger than mkbench writes is listed unreadable, with
// the file and its size, and the listing goes on.
package runs

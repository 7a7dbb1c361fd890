// Package experiments will run the paper's experiment suites (ablation
// table, way/shot versatility, efficiency in D, the MAML baseline) on top
// of engine.Run and export their tables and figures. Like engine, it never
// imports UI packages.
package experiments

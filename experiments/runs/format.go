package runs

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The runs table's cells, shared by `mkbench runs` and the workbench's
// runs screen so that both say the same thing.

// MetricText is a run's metric cell: the final evaluation as mean ± 95%
// interval (accuracy in percent), "val " before a validation's, "–"
// without either.
func MetricText(r Run) string {
	e := r.Eval
	if e == nil {
		return "–"
	}
	s := fmt.Sprintf("%.4f ± %.4f", e.Mean, e.CI95)
	if e.Metric == "accuracy" {
		s = fmt.Sprintf("%.2f%% ± %.2f", 100*e.Mean, 100*e.CI95)
	}
	if r.Val {
		s = "val " + s
	}
	return s
}

// Duration is a training time cell: 42s, 12m05s, 3h04m; "–" for none.
func Duration(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	switch {
	case sec <= 0:
		return "–"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// Age is an age cell, coarse as ages are read: 40s, 5m, 3h, 12d.
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// InGroup is a run's directory as its group's rows show it: relative to
// the experiment or sweep directory.
func InGroup(r Run) string {
	if r.Group == "" {
		return r.Rel
	}
	rel, err := filepath.Rel(r.Group, r.Rel)
	if err != nil {
		return r.Rel
	}
	return rel
}

// DeviceText is a run's device cell: the device's name without its
// platform ("opencl:0 NVIDIA H100", not "… (NVIDIA CUDA)"), "–" when not
// known.
func DeviceText(label string) string {
	if label == "" {
		return "–"
	}
	if i := strings.LastIndex(label, " ("); i > 0 && strings.HasSuffix(label, ")") {
		return label[:i]
	}
	return label
}

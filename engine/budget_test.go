package engine

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A budget is what it says, or refused: never silently none (1e-12 rounds
// to a zero Duration, which reads as no limit) and never wrapped around.
func TestMinutesBudget(t *testing.T) {
	for _, c := range []struct {
		m    float64
		want time.Duration
	}{{0, 0}, {1, time.Minute}, {0.5, 30 * time.Second}, {1.0 / 60, time.Second}, {90, 90 * time.Minute}, {MaxBudgetMinutes, time.Duration(MaxBudgetMinutes) * time.Minute}} {
		if got, err := MinutesBudget(c.m); err != nil || got != c.want {
			t.Errorf("MinutesBudget(%g) = %v, %v; want %v", c.m, got, err, c.want)
		}
	}
	for _, c := range []struct {
		m    float64
		says string
	}{{1e-12, "less than a second"}, {0.01, "less than a second"}, {-1, "positive"}, {math.NaN(), "positive"},
		{math.Inf(1), "beyond"}, {1e300, "beyond"}, {MaxBudgetMinutes * 1.5, "beyond"}, {math.Inf(-1), "positive"}} {
		if got, err := MinutesBudget(c.m); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("MinutesBudget(%g) = %v, %v; want an error saying %q", c.m, got, err, c.says)
		}
	}
}

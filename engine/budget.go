package engine

import (
	"fmt"
	"math"
	"time"
)

// Bounds of a training-time budget given in minutes (--minutes, a sweep's
// minutes:). Below a second a budget would end training at its first step
// while reading as a limit; past MaxBudgetMinutes (about nineteen years)
// it is no limit at all, and a float that large overflows a
// time.Duration.
const (
	MinBudget        = time.Second
	MaxBudgetMinutes = 1e7
)

// MinutesBudget is the training-time budget of m minutes (RunOptions.Budget):
// 0 for none when m is 0; an error naming m for a negative, non-finite,
// sub-second or overflowing value, which would otherwise be ignored or
// wrap around silently.
func MinutesBudget(m float64) (time.Duration, error) {
	switch {
	case m == 0:
		return 0, nil
	case math.IsNaN(m) || m < 0:
		return 0, fmt.Errorf("%g minutes is not a training time: give a positive number of minutes (or none for no limit)", m)
	case m > MaxBudgetMinutes:
		return 0, fmt.Errorf("%g minutes is beyond any training time (at most %g): leave the limit out for none", m, MaxBudgetMinutes)
	}
	d := time.Duration(m * float64(time.Minute))
	if d < MinBudget {
		return 0, fmt.Errorf("%g minutes is less than a second of training: give at least %.4f (a second)", m, MinBudget.Minutes())
	}
	return d, nil
}

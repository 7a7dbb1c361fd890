// Package task holds the plain types that task families and the model
// share: a meta-batch of few-shot tasks (Batch), the interfaces that draw
// them (Source, CurveSource) and the seeded random streams they draw from
// (Stream). It imports nothing of the engine, so data loaders depend on it
// without pulling in gorgonia or the engine's BLAS.
package task

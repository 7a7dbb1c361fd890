package ops

// Helpers of the conv benchmarks, for conv_step_test.go (package ops_test).
var (
	Conv4Omniglot = conv4Omniglot
	ConvFlops     = convFlops
	ConvReport    = convReport
	ConvCPUTime   = convCPUTime
)

const Conv4Batch = conv4Batch

// Package tbevents writes and reads TensorBoard event files, so that
// `tensorboard --logdir runs` shows mkbench runs beside a researcher's
// other experiments, without TensorFlow.
//
// An event file is a TFRecord file (framing and masked CRC-32C shared with
// the Meta-Dataset reader, internal/tfrecord) of tensorboard.Event
// protobufs, encoded with protowire from TensorBoard's own definitions
// (tensorboard/compat/proto: event.proto, summary.proto, histogram.proto):
//
//	Event          wall_time=1 double, step=2 int64, file_version=3 string,
//	               summary=5 Summary, session_log=7 SessionLog
//	SessionLog     status=1 enum (START=1)
//	Summary        value=1 repeated Value
//	Value          tag=1 string, simple_value=2 float, histo=5 HistogramProto
//	HistogramProto min=1, max=2, num=3, sum=4, sum_squares=5 double,
//	               bucket_limit=6, bucket=7 packed repeated double
//
// A file starts with the event {file_version: "brain.Event:2"}; scalars
// are Summary values with simple_value (float32 on the wire, as
// TensorBoard stores them), histograms are HistogramProtos whose bucket i
// covers (bucket_limit[i-1], bucket_limit[i]] (the first from min).
//
// Restarts follow TensorFlow's convention: each process writing a run
// starts a new file, events.out.tfevents.<unix seconds>.<host>.<pid>
// (TensorBoard reads every file of a directory whose name contains
// "tfevents", in name order), and a process that resumes a run at step S
// writes a SessionLog START event at step S+1 first, on which TensorBoard
// drops the steps from S+1 on that it read before: the orphans of the
// process that died after its last checkpoint. CutBack removes them from
// the older files as well, for readers that ignore SessionLog.
//
// Read decodes the events this package writes (scalars, histograms,
// file versions and session logs; other values are skipped, unknown
// fields too, as protobuf requires). The tests check the encoding against
// a decoder written separately from TensorBoard's .proto files, and
// against protobufjs reading the same definitions (testdata/read.mjs).
package tbevents

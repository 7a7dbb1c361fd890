// Package tfrecord reads and writes TensorFlow's TFRecord files and decodes the
// tf.train.Example messages they usually hold, without TensorFlow.
//
// Meta-Dataset ships every class of every source as one TFRecord file of
// Examples (an encoded image and an int64 label); TensorBoard event files use
// the same framing. Each record on disk is
//
//	uint64 length            little-endian
//	uint32 masked CRC-32C    of the 8 length bytes
//	byte   data[length]
//	uint32 masked CRC-32C    of data
//
// with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 in 32-bit arithmetic.
// Both checksums are always verified: records come from downloads and
// conversions that can be cut short or damaged, and a bad image should be a
// clear error naming the file and record, not a surprise deep in training.
//
// Damage is reported as *Error, which carries the file name, the record
// index and its byte offset, and matches ErrCorrupt or ErrTruncated under
// errors.Is. A length field is never trusted for an allocation: records
// above MaxRecordLen are refused, and a length larger than what the file
// holds is a truncation found before (or, for streams, while) reading it.
//
// The Example decoder works on the protobuf wire format directly
// (google.golang.org/protobuf/encoding/protowire) so that no generated code
// or TensorFlow protos are needed; unknown fields are skipped as protobuf
// requires. This package imports nothing else from mkbench.
package tfrecord

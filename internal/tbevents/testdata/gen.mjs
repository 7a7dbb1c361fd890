// Writes fixture.tfevents and fixture.json with an implementation
// independent of package tbevents: protobufjs encodes the events from
// TensorBoard's definitions (tensorboard.proto) and @roboflow/tfrecords
// frames them (its own CRC-32C). fixture.json holds what each event says,
// for tbevents.Read to reproduce. The fixture also holds what mkbench
// never writes and a reader must skip: source_metadata, an image value.
//
// Generated with Node v20.20.2 and
//   npm install protobufjs@8.8.1 @roboflow/tfrecords@1.0.4
// run from that scratch directory, outside the repository:
//   cd /tmp/tb-gen && node /path/to/internal/tbevents/testdata/gen.mjs
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.cwd(), 'noop.js'));
const protobuf = require('protobufjs');
const { TFRecordsBuilder } = require('@roboflow/tfrecords');

const here = dirname(fileURLToPath(import.meta.url));
const root = protobuf.parse(readFileSync(join(here, 'tensorboard.proto'), 'utf8'), { keepCase: true }).root;
const Event = root.lookupType('tensorboard.Event');

const wall = 1764000000.25;
const events = [
  { wall_time: wall, file_version: 'brain.Event:2', source_metadata: { writer: 'gen.mjs' } },
  { wall_time: wall + 1, step: 10, summary: { value: [
    { tag: 'loss', simple_value: 1.5 },
    { tag: 'kl', simple_value: 0 },
    { tag: 'elbo', simple_value: -1.5 },
    { tag: 'lr', simple_value: 0.001 },
    { tag: 'grad_norm', simple_value: 3.4028234663852886e38 },
  ] } },
  { wall_time: wall + 2, step: 20, summary: { value: [
    { tag: 'omega/step0', histo: { min: -2, max: 3, num: 6, sum: 2.5, sum_squares: 17.25,
      bucket_limit: [-0.75, 0.5, 1.75, 3], bucket: [2, 1, 0, 3] } },
    { tag: 'picture', image: { height: 1, width: 1, colorspace: 1, encoded_image_string: Buffer.from([1, 2, 3]) } },
    { tag: 'val/accuracy', simple_value: 0.8125 },
  ] } },
  { wall_time: wall + 3, step: 21, session_log: { status: 1 } },
  { wall_time: wall + 4, step: 4294967306, summary: { value: [{ tag: 'loss', simple_value: 0.25 }] } },
];
const recs = events.map((e) => {
  const err = Event.verify(e);
  if (err) throw new Error(err);
  return Buffer.from(Event.encode(Event.fromObject(e)).finish());
});
writeFileSync(join(here, 'fixture.tfevents'), TFRecordsBuilder.buildTFRecords(recs));

// What a reader should find: the image is skipped, floats are float32.
const f32 = (x) => Math.fround(x);
const expect = events.map((e) => {
  const o = { wall_time: e.wall_time, step: e.step || 0 };
  if (e.file_version) o.file_version = e.file_version;
  if (e.session_log) o.session_status = e.session_log.status;
  if (e.summary) {
    o.values = e.summary.value.filter((v) => !v.image).map((v) =>
      v.histo ? { tag: v.tag, histo: v.histo } : { tag: v.tag, simple_value: f32(v.simple_value) });
  }
  return o;
});
writeFileSync(join(here, 'fixture.json'), JSON.stringify(expect, null, 1) + '\n');

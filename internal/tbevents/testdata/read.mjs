// Decodes a TensorBoard event file with code that shares nothing with
// package tbevents: the TFRecord framing with @roboflow/tfrecords' own
// CRC-32C (both masked checksums verified), each record with protobufjs
// from TensorBoard's definitions (tensorboard.proto beside this script).
// Prints the events as JSON: [{wall_time, step, file_version,
// session_status, values: [{tag, simple_value | histo | other}]}].
//
//   node read.mjs FILE
//
// Packages resolve from the working directory, then NODE_PATH:
//   npm install --prefix DIR protobufjs@8.8.1 @roboflow/tfrecords@1.0.4
//   NODE_PATH=DIR/node_modules node read.mjs FILE
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.cwd(), 'noop.js'));
const protobuf = require('protobufjs');
const { crc32c, maskCrc, readInt64 } = require('@roboflow/tfrecords/src/tensorFlowHelpers');

const here = dirname(fileURLToPath(import.meta.url));
const root = protobuf.parse(readFileSync(join(here, 'tensorboard.proto'), 'utf8'), { keepCase: true }).root;
const Event = root.lookupType('tensorboard.Event');

const data = readFileSync(process.argv[2]);
const out = [];
for (let pos = 0; pos < data.length;) {
  if (pos + 12 > data.length) throw new Error(`record ${out.length}: truncated header`);
  const lenBuf = data.subarray(pos, pos + 8);
  const len = readInt64(lenBuf);
  if (maskCrc(crc32c(lenBuf)) !== data.readUInt32LE(pos + 8)) throw new Error(`record ${out.length}: length CRC`);
  pos += 12;
  if (pos + len + 4 > data.length) throw new Error(`record ${out.length}: truncated data`);
  const rec = data.subarray(pos, pos + len);
  if (maskCrc(crc32c(rec)) !== data.readUInt32LE(pos + len)) throw new Error(`record ${out.length}: data CRC`);
  pos += len + 4;
  const ev = Event.toObject(Event.decode(rec), { longs: Number, enums: Number, defaults: true, oneofs: true });
  const e = { wall_time: ev.wall_time, step: ev.step };
  if (ev.what === 'file_version') e.file_version = ev.file_version;
  if (ev.what === 'session_log') e.session_status = ev.session_log.status;
  if (ev.what === 'summary') {
    e.values = ev.summary.value.map((v) => {
      const o = { tag: v.tag };
      if (v.value === 'simple_value') o.simple_value = v.simple_value;
      else if (v.value === 'histo') o.histo = v.histo;
      else o.other = v.value || 'none';
      return o;
    });
  }
  out.push(e);
}
process.stdout.write(JSON.stringify(out) + '\n');

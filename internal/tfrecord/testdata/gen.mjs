// Writes three.tfrecords and three.json with an implementation independent of
// package tfrecord: @roboflow/tfrecords (its own JavaScript CRC-32C and
// framing, google-protobuf serialisation) and, for the third record,
// google-protobuf's BinaryWriter driven by hand.
//
// Generated with Node v20.20.2 and
//   npm install @roboflow/tfrecords@1.0.4 pngjs@7.0.0
// (google-protobuf 3.21.4 came with @roboflow/tfrecords), run from that
// scratch directory, outside the repository:
//   cd /tmp/tfr-gen && node /path/to/internal/tfrecord/testdata/gen.mjs
// The output is written next to this script.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Packages resolve from the working directory, so that node_modules never
// has to live in the repository.
const require = createRequire(join(process.cwd(), 'noop.js'));
const { TFRecordsBuilder, FeatureType } = require('@roboflow/tfrecords');
const { BinaryWriter } = require('google-protobuf');
const { PNG } = require('pngjs');

const out = dirname(fileURLToPath(import.meta.url));

function png(w, h, colorType, pixel) {
  const img = new PNG({ width: w, height: h });
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const [r, g, b] = pixel(x, y);
      const i = 4 * (y * w + x);
      img.data[i] = r; img.data[i + 1] = g; img.data[i + 2] = b; img.data[i + 3] = 255;
    }
  }
  return PNG.sync.write(img, { colorType });
}

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

const images = [
  png(12, 12, 2, (x, y) => (x >= 2 && x < 6 && y >= 3 && y < 7 ? [220, 30, 30] : [40, 40, 40])),
  png(10, 14, 0, (x, y) => ((x + y) % 3 === 0 ? [0, 0, 0] : [255, 255, 255])),
  png(8, 8, 2, (x, y) => [x * 32, y * 32, 128]),
];
const expect = [];

// Records 0 and 1: the library's builder (packed int64 and float lists).
for (const [i, label] of [[0, 7], [1, 42]]) {
  const b = new TFRecordsBuilder();
  b.addFeature('image', FeatureType.Binary, images[i]);
  b.addFeature('label', FeatureType.Int64, label);
  b.addArrayFeature('weight', FeatureType.Float, [0.5, -1.25]);
  b.addFeature('name', FeatureType.String, `img-${i}`);
  expect.push({ b: b.build(), label, name: `img-${i}`, weight: [0.5, -1.25] });
}

// Record 2: by hand, to cover what the builder never writes: unpacked
// repeated int64 and float, a negative int64 (10-byte varint), a map entry
// with its value before its key, and unknown fields at every level.
{
  const w = new BinaryWriter();
  w.writeUint32(9, 12345); // unknown Example field
  w.beginSubMessage(1); // Example.features
  const entry = (key, valueFirst, body) => {
    w.beginSubMessage(1); // Features.feature map entry
    if (!valueFirst) w.writeString(1, key);
    w.beginSubMessage(2);
    body();
    w.endSubMessage();
    if (valueFirst) w.writeString(1, key);
    w.endSubMessage();
  };
  entry('label', true, () => {
    w.beginSubMessage(3); // int64_list
    w.writeRepeatedInt64(1, [3]);
    w.endSubMessage();
  });
  entry('image', false, () => {
    w.beginSubMessage(1); // bytes_list
    w.writeBytes(1, images[2]);
    w.writeUint32(7, 99); // unknown BytesList field
    w.endSubMessage();
  });
  entry('offsets', false, () => {
    w.writeString(15, 'ignored'); // unknown Feature field
    w.beginSubMessage(3);
    w.writeRepeatedInt64(1, [-3, 0, 2 ** 40]);
    w.endSubMessage();
  });
  entry('weight', false, () => {
    w.beginSubMessage(2); // float_list
    w.writeRepeatedFloat(1, [0.75, 2]);
    w.endSubMessage();
  });
  w.writeUint32(5, 1); // unknown Features field
  w.endSubMessage();
  expect.push({ b: Buffer.from(w.getResultBuffer()), label: 3, weight: [0.75, 2], offsets: [-3, 0, 2 ** 40] });
}

writeFileSync(join(out, 'three.tfrecords'), TFRecordsBuilder.buildTFRecords(expect.map((e) => e.b)));
const json = expect.map((e, i) => {
  const { b, ...rest } = e;
  return { ...rest, record_len: b.length, image_len: images[i].length, image_sha256: sha256(images[i]),
    image_width: [12, 10, 8][i], image_height: [12, 14, 8][i], image_gray: i === 1 };
});
writeFileSync(join(out, 'three.json'), JSON.stringify(json, null, 2) + '\n');

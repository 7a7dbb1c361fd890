// Writes a tiny Meta-Dataset-format tree (three sources, one per spec kind)
// with an implementation independent of mkbench: records framed by
// @roboflow/tfrecords (its own JavaScript CRC-32C; Examples serialised by
// google-protobuf), PNGs encoded by pngjs, JPEGs by jpeg-js. The spec files
// copy the layout of the released ones (key order, 2-space indent, string
// keys, a stale path). manifest.json records, for every record, the image
// format, size, sha256 and one probe pixel inside the class-coloured mark.
//
// Generated with Node v20.20.2 and
//   npm install @roboflow/tfrecords@1.0.4 pngjs@7.0.0 jpeg-js@0.4.4
// (google-protobuf 3.21.4 came with @roboflow/tfrecords), run from that
// scratch directory, outside the repository:
//   cd /tmp/tfr-gen && node /path/to/datasets/testdata/metadataset/gen.mjs
// The output is written next to this script.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.cwd(), 'noop.js'));
const { TFRecordsBuilder, FeatureType } = require('@roboflow/tfrecords');
const { PNG } = require('pngjs');
const jpeg = require('jpeg-js');

const root = dirname(fileURLToPath(import.meta.url));
const manifest = {};

// A class-coloured 4x4 square on a dark background whose position moves with
// the image index, so that images of one class differ and classes differ by
// colour; grey images get a black glyph on white instead (Omniglot-like).
function draw(cls, idx, w, h, gray) {
  const rgba = Buffer.alloc(4 * w * h);
  const hue = (cls * 137) % 360;
  const colour = hsv(hue);
  const sx = (idx * 3 + cls) % (w - 4);
  const sy = (idx * 5 + 2 * cls) % (h - 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const inMark = x >= sx && x < sx + 4 && y >= sy && y < sy + 4;
      let px;
      if (gray) {
        // The glyph is the 4x4 bit pattern of cls + 1, one bit per pixel.
        const bit = inMark && ((cls + 1) >> ((y - sy) * 4 + (x - sx))) & 1;
        px = bit || (inMark && x === sx) ? [0, 0, 0] : [255, 255, 255];
      } else {
        px = inMark ? colour : [30 + x * 2, 30 + y * 2, 40];
      }
      rgba.set([...px, 255], 4 * (y * w + x));
    }
  }
  // The probe is the mark's first column, black in grey glyphs too.
  return { rgba, probe: [sx, sy + 1, ...(gray ? [0, 0, 0] : colour)] };
}

function hsv(h) {
  const f = (n) => {
    const k = (n + h / 60) % 6;
    return Math.round(255 * (1 - Math.max(0, Math.min(k, 4 - k, 1))));
  };
  return [f(5), f(3), f(1)];
}

function encode(format, rgba, w, h, gray) {
  if (format === 'jpeg') return jpeg.encode({ data: rgba, width: w, height: h }, 90).data;
  const img = new PNG({ width: w, height: h });
  rgba.copy(img.data);
  return PNG.sync.write(img, { colorType: gray ? 0 : 2 });
}

// classes: [{id, count, format(idx), size(idx) -> [w, h], gray}]
function writeSource(name, spec, classes) {
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  writeFileSync(join(dir, 'dataset_spec.json'), JSON.stringify(spec, null, 2) + '\n');
  manifest[name] = {};
  for (const c of classes) {
    const recs = [];
    const info = [];
    for (let i = 0; i < c.count; i++) {
      const [w, h] = c.size(i);
      const format = c.format(i);
      const { rgba, probe } = draw(c.id, i, w, h, c.gray);
      const img = encode(format, rgba, w, h, c.gray);
      const b = new TFRecordsBuilder();
      b.addFeature('image', FeatureType.Binary, img);
      b.addFeature('label', FeatureType.Int64, c.id);
      recs.push(b.build());
      info.push({ format, w, h, gray: c.gray, sha256: createHash('sha256').update(img).digest('hex').slice(0, 16), probe });
    }
    writeFileSync(join(dir, `${c.id}.tfrecords`), TFRecordsBuilder.buildTFRecords(recs));
    manifest[name][c.id] = info;
  }
}

const splitCounts = (t, v, s) => ({ TRAIN: t, VALID: v, TEST: s });
const stale = (name) => `/gcs/metadataset/records/${name}`;

// tiny_plain: 6/3/3 classes, 8 images each except class 7 (VALID) with 5;
// the TEST classes are JPEG, the rest RGB PNG.
{
  const n = 12;
  const ipc = {}, names = {};
  const classes = [];
  const labels = ['apple', 'boat', 'cat', 'drum', 'eel', 'fern', 'gull', 'harp', 'ibis', 'jeep', 'kite', 'lamp'];
  for (let id = 0; id < n; id++) {
    const count = id === 7 ? 5 : 8;
    ipc[id] = count;
    names[id] = labels[id];
    classes.push({ id, count, gray: false, size: () => [12, 12], format: () => (id >= 9 ? 'jpeg' : 'png') });
  }
  writeSource('tiny_plain', {
    name: 'tiny_plain', classes_per_split: splitCounts(6, 3, 3), images_per_class: ipc,
    class_names: names, path: stale('tiny_plain'), file_pattern: '{}.tfrecords', __class__: 'DatasetSpecification',
  }, classes);
}

// tiny_bilevel: 2/1/1 superclasses holding 6, 6, 5, 6 classes; 6 grey PNGs
// per class (Omniglot's are 1-bit 105x105, 20 per class).
{
  const perSuper = [6, 6, 5, 6];
  const alphabets = ['Aleph', 'Runic', 'Ogham', 'Glagol'];
  const cps = {}, sNames = {}, ipc = {}, names = {};
  const classes = [];
  let id = 0;
  perSuper.forEach((k, s) => {
    cps[s] = k;
    sNames[s] = alphabets[s];
    for (let j = 0; j < k; j++, id++) {
      ipc[id] = 6;
      names[id] = `${alphabets[s]}-character${String(j + 1).padStart(2, '0')}`;
      classes.push({ id, count: 6, gray: true, size: () => [12, 12], format: () => 'png' });
    }
  });
  writeSource('tiny_bilevel', {
    name: 'tiny_bilevel', superclasses_per_split: splitCounts(2, 1, 1), classes_per_superclass: cps,
    images_per_class: ipc, superclass_names: sNames, class_names: names, path: stale('tiny_bilevel'),
    file_pattern: '{}.tfrecords', __class__: 'BiLevelDatasetSpecification',
  }, classes);
}

// tiny_hier: one small WordNet-like DAG per split. Leaves are classes, ids
// given in wn_id order within each split. TRAIN has a leaf under two parents
// and a node spanning only 3 leaves (not eligible: fewer than 5); TEST shares
// a leaf between its two internal nodes, as the real TEST graph does.
{
  // [wn_id, words, children]; leaves have no children entry.
  const graphs = {
    TRAIN: [
      ['n01000000', 'entity', ['n01100000', 'n01200000']],
      ['n01100000', 'animal', ['n01101001', 'n01101002', 'n01101003', 'n01101004', 'n01101005', 'n01150000']],
      ['n01200000', 'artifact', ['n01210000', 'n01150000', 'n01202001', 'n01202002']],
      ['n01210000', 'tool', ['n01211001', 'n01211002', 'n01211003']],
    ],
    VALID: [
      ['n02000000', 'plant', ['n02100000', 'n02000101']],
      ['n02100000', 'flower', ['n02101001', 'n02101002', 'n02101003', 'n02101004', 'n02101005']],
    ],
    TEST: [
      ['n03000000', 'device', ['n03100000', 'n03200000']],
      ['n03100000', 'instrument', ['n03101001', 'n03101002', 'n03101003', 'n03101004', 'n03150000']],
      ['n03200000', 'container', ['n03201001', 'n03201002', 'n03201003', 'n03201004', 'n03150000']],
    ],
  };
  const leafWords = (wn) => `leaf ${wn.slice(1)}`;
  const subgraphs = {}, ipc = {}, names = {};
  const classes = [];
  let id = 0;
  for (const [split, internal] of Object.entries(graphs)) {
    const children = new Map(internal.map(([wn, , ch]) => [wn, ch]));
    const words = new Map(internal.map(([wn, w]) => [wn, w]));
    const parents = new Map();
    for (const [wn, , ch] of internal) for (const c of ch) parents.set(c, [...(parents.get(c) || []), wn]);
    const all = [...new Set([...children.keys(), ...parents.keys()])].sort();
    const leaves = all.filter((wn) => !children.has(wn));
    const count = new Map();
    for (const wn of leaves) {
      const n = 5 + (id % 3); // 5, 6 or 7 images
      count.set(wn, n);
      names[id] = wn;
      const cid = id++;
      classes.push({
        id: cid, count: n, gray: false,
        size: (i) => [[16, 12], [12, 16], [14, 14]][i % 3],
        format: (i) => (i % 3 === 2 ? 'png' : 'jpeg'),
      });
    }
    // An internal node counts the images of the distinct leaves it spans.
    const span = (wn) => (children.has(wn) ? new Set(children.get(wn).flatMap((c) => [...span(c)])) : new Set([wn]));
    subgraphs[split] = all.map((wn) => ({
      wn_id: wn, words: words.get(wn) || leafWords(wn),
      children_ids: [...(children.get(wn) || [])].sort(), parents_ids: [...(parents.get(wn) || [])].sort(),
    }));
    ipc[split] = Object.fromEntries(all.map((wn) => [wn, [...span(wn)].reduce((s, l) => s + count.get(l), 0)]));
  }
  writeSource('tiny_hier', {
    name: 'tiny_hier', split_subgraphs: subgraphs, images_per_class: ipc, class_names: names,
    path: stale('tiny_hier'), file_pattern: '{}.tfrecords', __class__: 'HierarchicalDatasetSpecification',
  }, classes);
}

writeFileSync(join(root, 'manifest.json'), JSON.stringify(manifest) + '\n');

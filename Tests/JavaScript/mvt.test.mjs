// The MVT decoder (Public/js/mvt.js) against a tile of the test archive as Python's
// mapbox-vector-tile decodes it, and against hand-made protobuf for the edge cases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodeTile, decodeGeometry, ringArea, POINT, LINESTRING, POLYGON } from "../../Public/js/mvt.js";

const fixtures = new URL("../Fixtures/tiles/", import.meta.url);

test("a tile of the Naples archive decodes as Python's mapbox-vector-tile decodes it", () => {
  const expected = JSON.parse(readFileSync(new URL("naples-decoded.json", fixtures), "utf8"))["14/8841/6151"];
  const bytes = readFileSync(new URL("naples-14-8841-6151.mvt", fixtures));   // make-tiles.py wrote it
  const layers = decodeTile(bytes);
  assert.deepEqual(Object.keys(layers).sort(), Object.keys(expected).sort());
  const types = { Point: POINT, MultiPoint: POINT, LineString: LINESTRING, MultiLineString: LINESTRING, Polygon: POLYGON, MultiPolygon: POLYGON };
  for (const [name, layer] of Object.entries(expected)) {
    assert.equal(layers[name].extent, layer.extent);
    assert.equal(layers[name].features.length, layer.features.length, name);
    layer.features.forEach((f, i) => {
      const ours = layers[name].features[i];
      assert.equal(ours.type, types[f.type], `${name} ${i}`);
      assert.deepEqual(ours.properties, f.properties, `${name} ${i}`);
      assert.deepEqual(ours.geometry[0].slice(0, 2), f.first, `${name} ${i}`);
    });
  }
  const naples = layers.places.features.find((f) => f.properties.name === "Naples");
  assert.equal(naples.properties.population, 909048);
  // Exterior rings are clockwise on screen (positive area with y down).
  for (const f of layers.buildings.features) assert.ok(ringArea(f.geometry[0]) > 0);
});

// ----- hand-made protobuf -----

const varint = (n) => { const out = []; while (n > 127) { out.push((n & 127) | 128); n = Math.floor(n / 128); } out.push(n); return out; };
const zig = (n) => (n << 1) ^ (n >> 31);
const field = (number, type, payload) => [...varint(number * 8 + type), ...(type === 2 ? varint(payload.length) : []), ...payload];
const str = (s) => [...new TextEncoder().encode(s)];

test("values of every type, keys after features, ids and the default extent", () => {
  const values = [
    field(4, 2, field(1, 2, str("Zürich"))),
    field(4, 2, field(3, 1, [...new Uint8Array(new Float64Array([2.5]).buffer)])),
    field(4, 2, field(6, 0, varint(zig(-7)))),
    field(4, 2, field(7, 0, [1])),
    field(4, 2, field(5, 0, varint(2 ** 40))),
    field(4, 2, field(2, 5, [...new Uint8Array(new Float32Array([0.5]).buffer)])),
  ];
  const feature = field(2, 2, [
    ...field(1, 0, varint(300)),
    ...field(2, 2, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]),
    ...field(3, 0, [POINT]),
    ...field(4, 2, [9, zig(25), zig(17)]),           // MoveTo(1) 25,17
  ]);
  const layer = field(3, 2, [
    ...field(15, 0, [2]), ...field(1, 2, str("pois")), ...feature,
    ...["name", "score", "delta", "open", "big", "half"].flatMap((k) => field(3, 2, str(k))),
    ...values.flat(),
  ]);
  const tile = decodeTile(new Uint8Array(layer));
  const f = tile.pois.features[0];
  assert.equal(tile.pois.extent, 4096);
  assert.equal(tile.pois.version, 2);
  assert.equal(f.id, 300);
  assert.deepEqual(f.properties, { name: "Zürich", score: 2.5, delta: -7, open: true, big: 2 ** 40, half: 0.5 });
  assert.deepEqual(f.geometry, [[25, 17]]);
});

test("geometry commands: multipoints, lines, polygons with holes, the cursor carries over", () => {
  // The MVT specification's examples (§4.3.5).
  assert.deepEqual(decodeGeometry([17, 10, 14, 3, 9], POINT), [[5, 7], [3, 2]]);
  assert.deepEqual(decodeGeometry([9, 4, 4, 18, 0, 16, 16, 0], LINESTRING), [[2, 2, 2, 10, 10, 10]]);
  assert.deepEqual(decodeGeometry([9, 4, 4, 18, 0, 16, 16, 0, 9, 17, 17, 10, 4, 8], LINESTRING),
    [[2, 2, 2, 10, 10, 10], [1, 1, 3, 5]]);
  const polygon = decodeGeometry([9, 0, 0, 26, 20, 0, 0, 20, 19, 0, 15, 9, 22, 2, 26, 18, 0, 0, 18, 17, 0, 15,
    9, 4, 13, 26, 0, 8, 8, 0, 0, 7, 15], POLYGON);
  assert.equal(polygon.length, 3);
  assert.deepEqual(polygon[0], [0, 0, 10, 0, 10, 10, 0, 10, 0, 0]);
  assert.deepEqual(polygon[1], [11, 11, 20, 11, 20, 20, 11, 20, 11, 11]);
  assert.deepEqual(polygon[2], [13, 13, 13, 17, 17, 17, 17, 13, 13, 13]);
  assert.ok(ringArea(polygon[0]) > 0 && ringArea(polygon[2]) < 0);   // exterior, then a hole
  assert.throws(() => decodeGeometry([10, 2, 2], LINESTRING), /LineTo before MoveTo/);
  assert.throws(() => decodeGeometry([9, 2], POINT), /ends inside/);
});

test("truncated input is an error, not a hang", () => {
  assert.throws(() => decodeTile(new Uint8Array([0x1a, 0x05, 0x0a])), /past its message|truncated/);
  assert.throws(() => decodeTile(new Uint8Array([0x1a, 0x80])), /truncated/);
});

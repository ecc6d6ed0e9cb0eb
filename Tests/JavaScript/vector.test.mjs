// The vector style's rules (Public/js/vector.js): which bucket a Protomaps feature is drawn in,
// which archive zoom a view uses (overzoom past maxzoom), and paths and labels built from a tile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { bucketFor, tileZoom, buildTile, roadWidth, BUCKETS } from "../../Public/js/vector.js";
import { decodeTile, POINT, LINESTRING, POLYGON } from "../../Public/js/mvt.js";

test("features of the Protomaps layers land in the style's buckets", () => {
  assert.equal(bucketFor("earth", { kind: "earth" }, POLYGON, 3), "earth");
  assert.equal(bucketFor("water", { kind: "ocean" }, POLYGON, 3), "water");
  assert.equal(bucketFor("water", { kind: "river" }, LINESTRING, 12), "waterway");
  assert.equal(bucketFor("landuse", { kind: "park" }, POLYGON, 14), "park");
  assert.equal(bucketFor("landuse", { "pmap:kind": "forest" }, POLYGON, 14), "wood");   // schema v2 names
  assert.equal(bucketFor("landuse", { kind: "hospital" }, POLYGON, 14), "landuse");
  assert.equal(bucketFor("landcover", { kind: "glacier" }, POLYGON, 5), "glacier");
  assert.equal(bucketFor("buildings", { kind: "building" }, POLYGON, 14), "building");
  assert.equal(bucketFor("buildings", { kind: "building" }, POLYGON, 10), null);
  assert.equal(bucketFor("roads", { kind: "highway" }, LINESTRING, 6), "highway");
  assert.equal(bucketFor("roads", { kind: "major_road" }, LINESTRING, 9), "major_road");
  assert.equal(bucketFor("roads", { kind: "minor_road" }, LINESTRING, 9), null);
  assert.equal(bucketFor("roads", { kind: "minor_road" }, LINESTRING, 13), "minor_road");
  assert.equal(bucketFor("roads", { kind: "path" }, LINESTRING, 14), "path");
  assert.equal(bucketFor("boundaries", { kind: "country", kind_detail: 2 }, LINESTRING, 4), "boundary_country");
  assert.equal(bucketFor("boundaries", { kind: "region" }, LINESTRING, 6), "boundary_region");
  assert.equal(bucketFor("pois", { kind: "cafe" }, POINT, 15), null);
  for (const id of ["earth", "water", "park", "building", "major_road", "highway", "boundary_country"]) {
    assert.ok(BUCKETS.some((b) => b.id === id), id);
  }
  // Water above land, roads above buildings, borders last.
  const order = BUCKETS.map((b) => b.id);
  assert.ok(order.indexOf("earth") < order.indexOf("water") && order.indexOf("building") < order.indexOf("minor_road"));
  assert.ok(roadWidth(16, 2) > roadWidth(14, 2) && roadWidth(14, 2) > roadWidth(8, 2));
});

test("views past the archive's maxzoom use its last level (overzoom), tiles drawn at ~512 px", () => {
  assert.equal(tileZoom(14, 0, 14), 13);
  assert.equal(tileZoom(15.2, 0, 14), 14);
  assert.equal(tileZoom(18, 0, 14), 14);
  assert.equal(tileZoom(0.3, 0, 14), 0);
  assert.equal(tileZoom(3, 5, 14), 5);
});

test("a tile becomes one path per bucket and labels for its places", () => {
  const calls = [];
  const fakePath = () => { const p = { ops: 0, moveTo() { p.ops++; }, lineTo() { p.ops++; }, closePath() {} }; calls.push(p); return p; };
  const layers = decodeTile(readFileSync(new URL("../Fixtures/tiles/naples-14-8841-6151.mvt", import.meta.url)));
  const { paths, labels } = buildTile(layers, 14, fakePath);
  assert.deepEqual([...paths.keys()].sort(), ["building", "earth", "major_road", "minor_road"].filter((k) => paths.has(k)).sort());
  assert.ok(paths.has("earth") && paths.has("building"));
  assert.ok([...paths.keys()].some((k) => k.endsWith("_road") || k === "highway"));
  assert.ok(labels.some((l) => l.name === "Naples" && l.x >= 0 && l.x <= 4096));
  assert.equal(calls.length, paths.size);
});

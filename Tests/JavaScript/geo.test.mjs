// Run with: node --test Tests/JavaScript (script/test does).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  project, unproject, wrapLon, visibleTiles, tileURL, cluster, parseLatLon, LRU, decodeRing,
  basemapLevel, worldSize, MAX_LAT, backoff, clampZoom,
} from "../../Public/js/geo.js";

const close = (a, b, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} ≉ ${b}`);

test("projection round-trips and has the Web Mercator landmarks", () => {
  close(project(0, 0).x, 0.5);
  close(project(0, 0).y, 0.5);
  close(project(-180, 0).x, 0);
  close(project(0, MAX_LAT).y, 0, 1e-9);
  close(project(0, -MAX_LAT).y, 1, 1e-9);
  for (const [lon, lat] of [[135.7681, 35.0116], [-122.4, 37.8], [8.54, 47.37], [-70, -50]]) {
    const p = project(lon, lat);
    const back = unproject(p.x, p.y);
    close(back.lon, lon, 1e-9);
    close(back.lat, lat, 1e-9);
  }
  // Latitudes past the edge are clamped, not mirrored.
  close(project(0, 89.9).y, 0, 1e-9);
});

test("longitude wraps into [-180, 180]", () => {
  assert.equal(wrapLon(190), -170);
  assert.equal(wrapLon(-190), 170);
  assert.equal(wrapLon(540), 180);
  assert.equal(wrapLon(0), 0);
  assert.equal(wrapLon(-180), -180);
});

test("visible tiles cover the view and wrap horizontally", () => {
  const tiles = visibleTiles({ x: 0.5, y: 0.5 }, 0, 800, 600);
  // One world tile of 256 px in an 800 px view: drawn three times side by side, all x = 0.
  assert.ok(tiles.length >= 3);
  assert.ok(tiles.every((t) => t.x === 0 && t.z === 0));
  const z3 = visibleTiles({ x: 0.01, y: 0.5 }, 3, 512, 512);
  assert.ok(z3.some((t) => t.x === 7), "tiles west of the antimeridian wrap to x = 7");
  assert.ok(z3.every((t) => t.x >= 0 && t.x < 8 && t.y >= 0 && t.y < 8));
  // Fractional zoom scales tiles of the floor level.
  const frac = visibleTiles({ x: 0.5, y: 0.5 }, 2.5, 256, 256);
  close(frac[0].size, worldSize(2.5) / 4);
});

test("tile URL templates", () => {
  assert.equal(tileURL("https://{s}.tile.example/{z}/{x}/{y}{r}.png", 3, 4, 5, true), "https://a.tile.example/3/4/5@2x.png");
  assert.equal(tileURL("/t/{z}/{x}/{y}.png", 1, 0, 1), "/t/1/0/1.png");
});

test("clustering groups near points and keeps far ones apart", () => {
  const points = [{ x: 0, y: 0 }, { x: 10, y: 5 }, { x: 200, y: 200 }, { x: 205, y: 198 }, { x: 500, y: 0 }];
  const clusters = cluster(points, 40);
  assert.equal(clusters.length, 3);
  assert.deepEqual(clusters.map((c) => c.members.length).sort(), [1, 2, 2]);
  // 1,000 random points: every point lands in exactly one cluster.
  const many = Array.from({ length: 1000 }, (_, i) => ({ x: (i * 7919) % 1000, y: (i * 104729) % 700 }));
  const result = cluster(many, 30);
  assert.equal(result.reduce((n, c) => n + c.members.length, 0), 1000);
  for (const c of result) for (const m of c.members) assert.ok(Math.hypot(m.x - c.x, m.y - c.y) <= 30);
});

test("coordinate parsing", () => {
  assert.deepEqual(parseLatLon("35.0116, 135.7681"), { lat: 35.0116, lon: 135.7681 });
  assert.deepEqual(parseLatLon("-33.9 18.4"), { lat: -33.9, lon: 18.4 });
  assert.equal(parseLatLon("Kyoto"), null);
  assert.equal(parseLatLon("95, 10"), null);
  assert.equal(parseLatLon("10, 181"), null);
});

test("LRU evicts the least recently used", () => {
  const lru = new LRU(2);
  const evicted = [];
  lru.onEvict = (k) => evicted.push(k);
  lru.set("a", 1);
  lru.set("b", 2);
  lru.get("a");
  lru.set("c", 3);
  assert.deepEqual(evicted, ["b"]);
  assert.ok(lru.has("a") && lru.has("c"));
});

test("ring decoding, basemap levels, backoff, zoom clamp", () => {
  assert.deepEqual(Array.from(decodeRing([100, 200, 5, -5], 0.01)), [1, 2, 1.05, 1.95]);
  assert.equal(basemapLevel(0), 0);
  assert.equal(basemapLevel(3), 1);
  assert.equal(basemapLevel(5), 2);
  assert.equal(basemapLevel(12), 3);
  assert.deepEqual([1, 2, 3, 10].map(backoff), [1, 2, 4, 30]);
  assert.equal(clampZoom(25), 18);
  assert.equal(clampZoom(-1), 0);
});

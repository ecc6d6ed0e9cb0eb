// A shared map: the owner's places on the map, read-only (drag and zoom; a pin opens its album,
// a cluster zooms in). The list of places under it holds the same links for keyboards and
// screen readers.
import { MapView } from "./map.js";
import { PinLayer } from "./pins.js";

document.documentElement.classList.add("js");
const canvas = document.getElementById("share-map");
if (canvas) {
  const places = JSON.parse(canvas.dataset.pins || "[]");
  const base = canvas.dataset.base;
  // A view that holds every place: the middle of their extent, zoomed until it fits.
  let lat = 25, lon = 10, zoom = 2;
  if (places.length) {
    const lats = places.map((p) => p.lat), lons = places.map((p) => p.lon);
    const [south, north, west, east] = [Math.min(...lats), Math.max(...lats), Math.min(...lons), Math.max(...lons)];
    lat = (south + north) / 2;
    lon = (west + east) / 2;
    const span = Math.max(north - south, (east - west) / 2, 0.05);
    zoom = Math.max(1, Math.min(12, Math.log2(180 / span)));
  }
  const map = new MapView(canvas, { lat, lon, zoom, interactive: true });
  const layer = new PinLayer();
  layer.set(places);
  map.layers.push(layer);
  map.redraw();
  map.on("tap", ({ x, y }) => {
    const hit = layer.hit(x, y);
    if (!hit) return;
    if (hit.count > 1) { map.animateZoom(x, y, Math.min(18, map.zoom + 2), 350); return; }
    location.href = `${base}/pins/${hit.members[0].id}`;
  });
  canvas.dataset.ready = "true";
}

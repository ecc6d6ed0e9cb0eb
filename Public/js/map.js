// The map: a Web Mercator slippy map on a canvas, with our own vector basemap (or raster tiles),
// and pointer, wheel, touch and keyboard interaction. No map library: see docs/architecture.md.
// The view, a base layer and the input put together; the page adds its layers (pins.js).
import { backoff } from "./geo.js";
import { View } from "./view.js";
import { Basemap } from "./basemap.js";
import { MapInput } from "./input.js";

export class MapView extends View {
  constructor(canvas, { lat, lon, zoom, tileTemplate = "none", interactive = true }) {
    super(canvas, { lat, lon, zoom });
    this.tileTemplate = tileTemplate && tileTemplate !== "none" ? tileTemplate : null;
    if (interactive) this.input = new MapInput(this);
    this.basemap = new Basemap(() => this.redraw());
    this.base = { draw: (ctx) => this.drawBase(ctx) };
    if (this.tileTemplate) this.loadTileInfo();
    this.redraw();
  }

  /** What /tiles serves (format, zoom range, bounds): vector tiles get their own layer, raster
   *  tiles are asked for only inside the archive's zooms and bounds. Their code is loaded only
   *  then: the built-in map (the default) never downloads it. */
  loadTileInfo(attempt = 1) {
    fetch("/tiles.json")
      .then((r) => { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(async (info) => {
        this.tileInfo = info;
        if (info.format === "mvt") {
          const { VectorTiles } = await import("./vector.js");
          this.vector = new VectorTiles(info, () => this.redraw());
        } else {
          const { RasterTiles } = await import("./raster.js");
          this.raster = new RasterTiles(this.tileTemplate, info, () => this.redraw());
        }
        this.redraw();
      })
      .catch(() => { if (attempt < 5) setTimeout(() => this.loadTileInfo(attempt + 1), backoff(attempt) * 1000); });
  }

  /** Tiles from /tiles when configured; where they are missing, the built-in map beneath. */
  drawBase(ctx) {
    const builtIn = () => this.basemap.draw(ctx, this);
    if (this.vector) this.vector.draw(ctx, this, builtIn);
    else if (this.raster) this.raster.draw(ctx, this, builtIn);
    else builtIn();
  }
}

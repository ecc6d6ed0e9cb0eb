// A Mapbox Vector Tile (MVT 2.1) decoder of our own: Protocol Buffers wire format (varints,
// length-delimited fields, fixed 32/64-bit numbers), then the tile's layers, features, properties
// and zig-zag encoded geometry commands. No DOM, so node --test checks it
// (Tests/JavaScript/mvt.test.mjs). See docs/architecture.md, "Street-level maps".

export const POINT = 1;
export const LINESTRING = 2;
export const POLYGON = 3;

const utf8 = new TextDecoder();

/** Reads protobuf fields from a byte range. */
class Reader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Unsigned varint, exact up to 2^53 (beyond that only its low digits matter to nobody here). */
  varint() {
    const b = this.bytes;
    let value = 0, shift = 0, byte;
    do {
      if (this.pos >= this.end) throw new Error("MVT: truncated varint");
      byte = b[this.pos++];
      value += shift < 28 ? (byte & 0x7f) << shift : (byte & 0x7f) * Math.pow(2, shift);
      shift += 7;
      if (shift > 70) throw new Error("MVT: varint too long");
    } while (byte & 0x80);
    return value;
  }

  /** Zig-zag: 0, -1, 1, -2 … encoded as 0, 1, 2, 3 … */
  svarint() {
    const n = this.varint();
    return n % 2 === 1 ? -(n + 1) / 2 : n / 2;
  }

  /** The next field's number and wire type, or null at the end. */
  tag() {
    if (this.pos >= this.end) return null;
    const key = this.varint();
    return { field: Math.floor(key / 8), type: key & 7 };
  }

  /** A length-delimited field's byte range. */
  range() {
    const length = this.varint();
    const start = this.pos;
    this.pos += length;
    if (this.pos > this.end) throw new Error("MVT: field runs past its message");
    return [start, this.pos];
  }

  string() {
    const [s, e] = this.range();
    return utf8.decode(this.bytes.subarray(s, e));
  }

  float() { const v = this.view.getFloat32(this.pos, true); this.pos += 4; return v; }
  double() { const v = this.view.getFloat64(this.pos, true); this.pos += 8; return v; }

  /** Packed repeated varints (tags, geometry). */
  packed() {
    const [s, e] = this.range();
    const out = [];
    const inner = new Reader(this.bytes, s, e);
    while (inner.pos < e) out.push(inner.varint());
    return out;
  }

  skip(type) {
    switch (type) {
      case 0: this.varint(); break;
      case 1: this.pos += 8; break;
      case 2: this.range(); break;
      case 5: this.pos += 4; break;
      default: throw new Error("MVT: unknown wire type " + type);
    }
    if (this.pos > this.end) throw new Error("MVT: field runs past its message");
  }
}

/**
 * Decodes a tile: { layerName: { name, extent, version, features: [{ id, type, properties, geometry }] } }.
 * Geometry is an array of parts, each a flat [x0, y0, x1, y1, …] in tile units (0…extent, y down):
 * for points every part is one point, for lines one line, for polygons one ring (exterior rings
 * clockwise on screen, holes counter-clockwise, as MVT 2.1 §4.3.4.4 requires).
 */
export function decodeTile(bytes) {
  if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
  const reader = new Reader(bytes);
  const layers = {};
  for (let tag; (tag = reader.tag());) {
    if (tag.field === 3 && tag.type === 2) {
      const [s, e] = reader.range();
      const layer = decodeLayer(bytes, s, e);
      layers[layer.name] = layer;
    } else {
      reader.skip(tag.type);
    }
  }
  return layers;
}

function decodeLayer(bytes, start, end) {
  const r = new Reader(bytes, start, end);
  const layer = { name: "", extent: 4096, version: 1, features: [] };
  const keys = [], values = [], raw = [];
  for (let tag; (tag = r.tag());) {
    if (tag.field === 1 && tag.type === 2) layer.name = r.string();
    else if (tag.field === 2 && tag.type === 2) raw.push(r.range());
    else if (tag.field === 3 && tag.type === 2) keys.push(r.string());
    else if (tag.field === 4 && tag.type === 2) { const [s, e] = r.range(); values.push(decodeValue(bytes, s, e)); }
    else if (tag.field === 5 && tag.type === 0) layer.extent = r.varint();
    else if (tag.field === 15 && tag.type === 0) layer.version = r.varint();
    else r.skip(tag.type);
  }
  // Features last: their tags index keys and values, which may come after them in the message.
  for (const [s, e] of raw) layer.features.push(decodeFeature(bytes, s, e, keys, values));
  return layer;
}

function decodeValue(bytes, start, end) {
  const r = new Reader(bytes, start, end);
  let value = null;
  for (let tag; (tag = r.tag());) {
    switch (tag.field) {
      case 1: value = r.string(); break;
      case 2: value = r.float(); break;
      case 3: value = r.double(); break;
      case 4: { const n = r.varint(); value = n >= 2 ** 63 ? n - 2 ** 64 : n; break; } // int64, two's complement
      case 5: value = r.varint(); break;
      case 6: value = r.svarint(); break;
      case 7: value = r.varint() !== 0; break;
      default: r.skip(tag.type);
    }
  }
  return value;
}

function decodeFeature(bytes, start, end, keys, values) {
  const r = new Reader(bytes, start, end);
  const feature = { id: undefined, type: 0, properties: {}, geometry: [] };
  let commands = [];
  for (let tag; (tag = r.tag());) {
    if (tag.field === 1 && tag.type === 0) feature.id = r.varint();
    else if (tag.field === 2 && tag.type === 2) {
      const tags = r.packed();
      for (let i = 0; i + 1 < tags.length; i += 2) {
        const key = keys[tags[i]], value = values[tags[i + 1]];
        if (key !== undefined && value !== undefined) feature.properties[key] = value;
      }
    } else if (tag.field === 3 && tag.type === 0) feature.type = r.varint();
    else if (tag.field === 4 && tag.type === 2) commands = r.packed();
    else r.skip(tag.type);
  }
  feature.geometry = decodeGeometry(commands, feature.type);
  return feature;
}

/** MoveTo (1), LineTo (2) and ClosePath (7), each with a count; parameters are zig-zag deltas
 *  from the cursor, which carries over between commands and parts. */
export function decodeGeometry(commands, type) {
  const parts = [];
  let x = 0, y = 0, part = null;
  for (let i = 0; i < commands.length;) {
    const command = commands[i] & 7, count = commands[i] >>> 3;
    i++;
    if (command === 1 || command === 2) {
      if (i + 2 * count > commands.length) throw new Error("MVT: geometry ends inside a command");
      for (let k = 0; k < count; k++) {
        const a = commands[i++], b = commands[i++];
        x += (a >>> 1) ^ -(a & 1);
        y += (b >>> 1) ^ -(b & 1);
        if (command === 1) {
          part = [x, y];
          parts.push(part);
        } else {
          if (!part) throw new Error("MVT: LineTo before MoveTo");
          part.push(x, y);
        }
      }
    } else if (command === 7) {
      if (part && type === POLYGON) part.push(part[0], part[1]);
    } else {
      throw new Error("MVT: unknown command " + command);
    }
  }
  return parts;
}

/** Twice the signed area of a ring (positive: clockwise with y down, i.e. an exterior ring). */
export function ringArea(ring) {
  let sum = 0;
  for (let i = 0, n = ring.length - 2; i < n; i += 2) sum += ring[i] * ring[i + 3] - ring[i + 2] * ring[i + 1];
  return sum;
}

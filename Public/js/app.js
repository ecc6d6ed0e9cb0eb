// The map page: wires the map, the pins, the pin card, place search and region saving to the
// server. Everything the page needs arrives in data attributes of #map (no inline script: CSP).
import { MapView } from "./map.js";
import { PinLayer } from "./pins.js";
import { parseLatLon, worldSize } from "./geo.js";
import { el } from "./dom.js";

document.documentElement.classList.add("js");
const root = document.getElementById("map");
const canvas = document.getElementById("map-canvas");
const csrf = root.dataset.csrf;
// A viewer on a shared map looks and opens albums; nothing on the page drops or deletes.
const readOnly = root.dataset.readOnly === "true";
const embedded = root.dataset.pins ? JSON.parse(root.dataset.pins) : null;

const map = new MapView(canvas, {
  lat: Number(root.dataset.lat), lon: Number(root.dataset.lon), zoom: Number(root.dataset.zoom),
  tileTemplate: root.dataset.tileUrl,
});
const pins = new PinLayer();
map.layers.push(pins);
// For tests, and for own-photos.js: a pin its photos made joins the map and the list.
window.virtualTourist = { map, pins, listAdd: (pin) => listAdd(pin) };

// ----- talking to the server -----

async function send(method, url, fields) {
  const body = fields ? new URLSearchParams({ ...fields, _csrf: csrf }) : undefined;
  const response = await fetch(url, {
    method, body, credentials: "same-origin",
    headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
  });
  if (!response.ok) {
    let message = `The server answered ${response.status}.`;
    if (response.status === 401 || response.status === 403) message = "Your session has ended. Reload the page and sign in again.";
    else if (response.status === 503) message = "The server is busy. Please try again in a moment.";
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

const toast = document.getElementById("map-toast");
let toastTimer;
function showToast(message, kind = "info") {
  toast.textContent = message;
  toast.dataset.kind = kind;
  toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { toast.hidden = true; }, kind === "error" ? 6000 : 3000);
}

// ----- pins -----
// Pins are a layer over the base: a change to them redraws the layers (map.redrawLayers), the base
// comes from its copy (view.js).

if (embedded) {
  // The first frame's pins (or clusters) came with the page.
  pins.set(embedded);
  if (root.dataset.viewClusters) pins.setClusters(JSON.parse(root.dataset.viewClusters));
  map.redrawLayers();
}
// Not every pin is in the page: those in (or near) the view, refreshed as the map moves (and on a
// shared map whenever another member drops or deletes one).
const loadInView = async () => {
  const b = map.bounds(map.width / 2);
  try {
    const data = await (await fetch(`/pins.json?bbox=${b.west},${b.south},${b.east},${b.north}&zoom=${map.zoom.toFixed(2)}`, { cache: "no-cache" })).json();
    const pending = pins.pins.filter((p) => p.pending);
    pins.set(data.pins);
    // A crowded view comes as clusters with counts (computed by the server), and the number
    // of pins inside, so nothing is left out without saying so.
    pins.setClusters(data.clusters || []);
    if (data.total !== undefined) root.dataset.pinsInView = String(data.total);
    pending.forEach((p) => pins.pins.unshift(p));
    map.redrawLayers();
  } catch { /* the next move tries again */ }
};
if (root.dataset.pinsComplete !== "true") {
  map.on("moveend", loadInView);
  loadInView(); // the page embedded the first view's pins; the server's view follows
}
// This tab's own drops and deletions, so the live stream (live.js) does not re-read the view for a
// change the page already shows. The server announces a change at commit, before it answers, so
// an event can come while its answer is still on the way: such events wait for the answers.
const own = { unanswered: 0, ids: new Set(), held: [], settled: () => {} };
const ownAsked = (id) => { own.unanswered++; if (id !== undefined) own.ids.add(id); };
const ownAnswered = (id) => { if (id !== undefined) own.ids.add(id); own.unanswered--; if (own.unanswered === 0) own.settled(); };
// A shared map's other members' pins, live (live.js: only shared maps load it).
if (root.dataset.live === "true") import("./live.js").then((live) => live.follow(root, map, loadInView, own));
root.dataset.ready = "true";

const hint = document.getElementById("map-hint");
setTimeout(() => hint.classList.add("faded"), 8000);

map.on("longpress", ({ lat, lon }) => dropPinAt(lat, lon));

async function dropPinAt(lat, lon) {
  if (readOnly) { showToast("You are a viewer on this map: ask an owner to make you an editor to drop pins."); return; }
  hint.classList.add("faded");
  closeCard();
  const temporary = pins.add({ id: -Date.now(), lat, lon, name: "Saving…", photos: 0, status: "new", pending: true });
  map.redrawLayers();
  if (navigator.vibrate) navigator.vibrate(15);
  ownAsked();
  let savedID;
  try {
    const saved = await send("POST", "/pins", { lat: lat.toFixed(6), lon: lon.toFixed(6) });
    savedID = saved.id;
    pins.replace(temporary, saved);
    listAdd(saved);
    root.dataset.pinCount = String(pins.pins.length);
    showToast(`Pin dropped near ${saved.name}.`);
  } catch (error) {
    pins.remove(temporary);
    showToast(`The pin could not be saved: ${error.message}`, "error");
  } finally {
    ownAnswered(savedID);
  }
  map.redrawLayers();
}

// ----- the pin list: a panel over the map, in step with it -----

const listPanel = document.getElementById("pin-list-details");
const listItems = document.getElementById("pins");
const listTitle = document.getElementById("pin-list-title");
function setListTotal(change) {
  if (!listTitle) return;
  const total = Math.max(0, Number(listTitle.dataset.total) + change);
  listTitle.dataset.total = String(total);
  listTitle.textContent = listTitle.textContent.replace(/\(\d+\)$/, `(${total})`);
}
if (listPanel && !location.hash.includes("pin-list")) listPanel.open = false;

function listAdd(pin) {
  if (!listItems) return;
  document.getElementById("no-pins")?.remove();
  listItems.prepend(el("li", { class: "pin-row", "data-pin-id": String(pin.id) },
    el("a", { href: `/pins/${pin.id}` }, el("strong", {}, pin.name || "Pin")), " ",
    el("span", { class: "muted" }, `${pin.lat.toFixed(4)}, ${pin.lon.toFixed(4)}`)));
  setListTotal(+1);
}

function listRemove(pin) {
  const row = listItems && listItems.querySelector(`li[data-pin-id="${pin.id}"]`);
  if (row) row.remove();
  setListTotal(-1);
}

// ----- the pin card -----

const card = document.getElementById("pin-card");
let cardPin = null;

function openCard(pin, x, y) {
  cardPin = pin;
  pins.selected = pin;
  const photos = pin.photos === 1 ? "1 photo" : `${pin.photos} photos`;
  const remove = readOnly ? "" : el("button", { type: "button", class: "button danger-outline", onclick: () => confirmDelete(pin) }, "Delete pin");
  card.replaceChildren(
    el("button", { type: "button", class: "card-close", "aria-label": "Close", onclick: closeCard }, "×"),
    el("h2", { id: "pin-card-title" }, pin.name || `${pin.lat.toFixed(4)}, ${pin.lon.toFixed(4)}`),
    el("p", { class: "muted" }, `${pin.lat.toFixed(4)}, ${pin.lon.toFixed(4)} · ${photos}`),
    el("div", { class: "card-actions" },
      el("a", { class: "button primary", href: `/pins/${pin.id}` }, "Open album"), remove),
  );
  card.hidden = false;
  positionCard(x, y);
  card.querySelector("a").focus({ preventScroll: true });
  map.redrawLayers();
}

function positionCard(x, y) {
  const w = card.offsetWidth, h = card.offsetHeight;
  const left = Math.max(8, Math.min(map.width - w - 8, x - w / 2));
  const top = y - h - 44 > 8 ? y - h - 44 : Math.min(map.height - h - 8, y + 12);
  card.style.left = `${left}px`;
  card.style.top = `${top}px`;
}

function closeCard() {
  if (card.hidden) return;
  card.hidden = true;
  cardPin = null;
  pins.selected = null;
  map.redrawLayers();
}

function confirmDelete(pin) {
  const actions = card.querySelector(".card-actions");
  const yes = el("button", { type: "button", class: "button danger", onclick: () => deletePin(pin) }, "Delete");
  actions.replaceChildren(
    el("span", { class: "confirm-text" }, "Delete this pin and its album?"), yes,
    el("button", { type: "button", class: "button", onclick: () => openCard(pin, ...cardPoint(pin)) }, "Cancel"),
  );
  yes.focus();
}

function cardPoint(pin) {
  const s = map.worldToScreen(pin.x, pin.y);
  return [s.x, s.y];
}

async function deletePin(pin) {
  closeCard();
  canvas.focus({ preventScroll: true }); // where the pin was: the map, not the page's top
  pins.remove(pin);
  map.redrawLayers();
  ownAsked(pin.id);
  try {
    await send("DELETE", `/pins/${pin.id}`);
    listRemove(pin);
    root.dataset.pinCount = String(pins.pins.length);
    showToast("Pin deleted.");
  } catch (error) {
    pins.add(pin, false);
    map.redrawLayers();
    showToast(`The pin could not be deleted: ${error.message}`, "error");
  } finally {
    ownAnswered();
  }
}

map.on("tap", ({ x, y }) => {
  const hit = pins.hit(x, y);
  if (!hit) { closeCard(); return; }
  if (hit.count > 1) {
    // A cluster: zoom in towards it until its pins separate.
    closeCard();
    const target = Math.min(18, map.zoom + 2);
    map.animateZoom(x, y, target, 350);
    return;
  }
  openCard(hit.members[0], x, y);
});
map.on("move", () => { if (cardPin) positionCard(...cardPoint(cardPin)); });
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && !card.hidden) { closeCard(); canvas.focus(); }
});

// ----- the map without a mouse -----
// The canvas is focusable: arrows pan and +/- zoom (map.js); Enter drops a pin at the centre
// crosshair; Tab and Shift+Tab step through the pins and clusters in view (then leave the map as
// usual); Enter opens the one in focus (a cluster zooms in), Delete asks to delete it. Each step is
// said in the live region.

const announcer = document.getElementById("map-announcer");
let keyboardIndex = -1;

function keyboardTargets() {
  return [...pins.hits].sort((a, b) => a.x - b.x || a.y - b.y);
}

function describe(target, index, count) {
  const where = `${index + 1} of ${count}`;
  if (target.count > 1) return `${target.count} pins close together, ${where}. Enter zooms in.`;
  const pin = target.members[0];
  const photos = pin.photos === 1 ? "1 photo" : `${pin.photos} photos`;
  return `${pin.name || "Pin"}, ${photos}, ${where}. Enter opens it${readOnly ? "" : ", Delete deletes it"}.`;
}

function clearKeyboardFocus() {
  if (keyboardIndex < 0 && !pins.focused) return;
  keyboardIndex = -1;
  pins.focused = null;
  root.dataset.keyboardPin = "";
  map.redrawLayers();
}

canvas.addEventListener("keydown", (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.key === "Tab") {
    const targets = keyboardTargets();
    const next = keyboardIndex + (e.shiftKey ? -1 : 1);
    if (keyboardIndex === -1 && e.shiftKey) return; // leave backwards at once
    if (next < 0 || next >= targets.length) { clearKeyboardFocus(); return; } // leave the map
    e.preventDefault();
    keyboardIndex = next;
    pins.focused = targets[next];
    root.dataset.keyboardPin = targets[next].count > 1 ? "cluster" : String(targets[next].members[0].id);
    announcer.textContent = describe(targets[next], next, targets.length);
    map.redrawLayers();
  } else if (e.key === "Enter" || e.key === " ") {
    e.preventDefault();
    const target = pins.focused;
    if (!target) {
      const { lat, lon } = map.view;
      dropPinAt(lat, lon);
    } else if (target.count > 1) {
      clearKeyboardFocus();
      map.animateZoom(target.x, target.y, Math.min(18, map.zoom + 2), 350);
      announcer.textContent = "Zoomed in. Tab to step through the pins.";
    } else {
      openCard(target.members[0], target.x, target.y + 16);
    }
  } else if (!readOnly && (e.key === "Delete" || e.key === "Backspace") && pins.focused && pins.focused.count === 1) {
    e.preventDefault();
    const target = pins.focused;
    openCard(target.members[0], target.x, target.y + 16);
    confirmDelete(target.members[0]);
  }
});
canvas.addEventListener("blur", clearKeyboardFocus);
map.on("move", () => { if (keyboardIndex >= 0) clearKeyboardFocus(); });
document.getElementById("drop-pin")?.addEventListener("click", () => {
  const { lat, lon } = map.view;
  dropPinAt(lat, lon);
});

// ----- zoom buttons -----

document.getElementById("zoom-in").addEventListener("click", () => map.zoomIn());
document.getElementById("zoom-out").addEventListener("click", () => map.zoomOut());

// ----- place search -----

const search = document.getElementById("place-search");
const list = document.getElementById("place-suggestions");
let suggestions = [];
let active = -1;
let searchTimer;
let searchSerial = 0;

function renderSuggestions() {
  list.replaceChildren(...suggestions.map((s, i) => el("li", {
    role: "option", id: `place-option-${i}`, "aria-selected": String(i === active), class: i === active ? "active" : "",
    onpointerdown: (e) => { e.preventDefault(); choose(i); },
  }, el("strong", {}, s.name), el("span", { class: "muted" }, s.detail))));
  list.hidden = suggestions.length === 0;
  search.setAttribute("aria-expanded", String(!list.hidden));
  if (active >= 0) search.setAttribute("aria-activedescendant", `place-option-${active}`); else search.removeAttribute("aria-activedescendant");
}

async function suggest() {
  const text = search.value.trim();
  const serial = ++searchSerial;
  const point = parseLatLon(text);
  if (point) {
    suggestions = [{ name: `${point.lat}, ${point.lon}`, detail: " — go to these coordinates", lat: point.lat, lon: point.lon, zoom: 11 }];
    active = 0;
    renderSuggestions();
    return;
  }
  if (text.length < 2) { suggestions = []; renderSuggestions(); return; }
  try {
    const data = await (await fetch(`/places/search?q=${encodeURIComponent(text)}`)).json();
    if (serial !== searchSerial) return; // an older answer arriving late
    suggestions = data.places.map((p) => ({
      name: p.name, detail: ` ${p.country}${p.population >= 1000 ? ` · ${formatPopulation(p.population)}` : ""}`,
      lat: p.lat, lon: p.lon, zoom: p.population > 1_000_000 ? 10 : 11,
    }));
    active = suggestions.length ? 0 : -1;
    renderSuggestions();
  } catch { /* offline for a moment: no suggestions */ }
}

function formatPopulation(n) {
  return n >= 1_000_000 ? `${(n / 1_000_000).toFixed(1)} M people` : `${Math.round(n / 1000)} k people`;
}

function choose(i) {
  const s = suggestions[i];
  if (!s) return;
  search.value = s.name;
  suggestions = [];
  renderSuggestions();
  map.flyTo(s.lat, s.lon, s.zoom);
  canvas.focus({ preventScroll: true });
}

search.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(suggest, 120); });
search.addEventListener("keydown", (e) => {
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    if (!suggestions.length) return;
    active = (active + (e.key === "ArrowDown" ? 1 : -1) + suggestions.length) % suggestions.length;
    renderSuggestions();
  } else if (e.key === "Escape") {
    suggestions = []; renderSuggestions();
  }
});
search.form.addEventListener("submit", async (e) => {
  e.preventDefault();
  clearTimeout(searchTimer);
  if (!suggestions.length) await suggest();
  if (suggestions.length) choose(Math.max(0, active));
  else if (search.value.trim()) showToast(`No place called “${search.value.trim()}” was found.`, "error");
});
search.addEventListener("blur", () => setTimeout(() => { suggestions = []; renderSuggestions(); }, 150));

// ----- remembering the region -----

let saveTimer;
let lastSaved = JSON.stringify(regionFields());
function regionFields() {
  const v = map.view;
  return { lat: v.lat.toFixed(6), lon: v.lon.toFixed(6), zoom: v.zoom.toFixed(3) };
}
map.on("moveend", () => {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(async () => {
    const fields = regionFields();
    const key = JSON.stringify(fields);
    if (key === lastSaved) return;
    try {
      await send("POST", "/region", fields);
      lastSaved = key;
      root.dataset.regionSaved = key;
    } catch { /* pagehide tries again */ }
  }, 800);
});
addEventListener("pagehide", () => {
  const fields = regionFields();
  if (JSON.stringify(fields) === lastSaved) return;
  navigator.sendBeacon("/region", new URLSearchParams({ ...fields, _csrf: csrf }));
});

// For tests and the benchmark: how wide the world is now, in CSS pixels.
window.virtualTourist.worldWidth = () => worldSize(map.zoom);

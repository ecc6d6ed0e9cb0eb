// The album page: live placeholders (Server-Sent Events, polling as the fallback), New Collection,
// Edit mode to remove photos, and the small map of the pin.
import { MapView } from "./map.js";
import { PinLayer } from "./pins.js";
import { el } from "./dom.js";

document.documentElement.classList.add("js");
const album = document.getElementById("album");
const pinID = album.dataset.pin;
const csrf = album.dataset.csrf;
const grid = document.getElementById("photo-grid");
const statusBox = document.getElementById("album-status");
const newCollection = document.getElementById("new-collection");
const editToggle = document.getElementById("edit-toggle");

// ----- the small map -----
const mapCanvas = document.getElementById("album-map");
const small = new MapView(mapCanvas, { lat: Number(mapCanvas.dataset.lat), lon: Number(mapCanvas.dataset.lon), zoom: 8, interactive: false });
const pinLayer = new PinLayer();
pinLayer.set([{ id: Number(pinID), lat: Number(mapCanvas.dataset.lat), lon: Number(mapCanvas.dataset.lon) }]);
small.layers.push(pinLayer);
small.redraw();

// ----- rendering the grid from album.json -----

function removeButton(photo) {
  const label = photo.title || "Untitled photo";
  return el("form", { class: "remove", method: "post", action: `/photos/${photo.id}/delete` },
    el("input", { type: "hidden", name: "_csrf", value: csrf }),
    el("button", { type: "submit", "aria-label": `Remove ${label}`, title: "Remove" }, "×"));
}

function photoItem(photo) {
  const title = photo.title || "Untitled photo";
  if (photo.status === "ready") {
    const img = el("img", { src: `/photos/${photo.id}`, alt: title, loading: "lazy" });
    if (photo.width) { img.width = photo.width; img.height = photo.height; }
    const credit = [photo.owner, photo.license].filter(Boolean).join(" · ");
    return el("li", { class: "photo", "data-id": photo.id, "data-status": "ready" },
      el("a", { href: `/photos/${photo.id}/view`, title: `${title} — ${credit}` }, img, el("span", { class: "credit" }, credit)),
      removeButton(photo));
  }
  if (photo.status === "failed") {
    return el("li", { class: "photo failed", "data-id": photo.id, "data-status": "failed" },
      el("div", { class: "placeholder" }, el("span", {}, "Could not download")), removeButton(photo));
  }
  return el("li", { class: "photo pending", "data-id": photo.id, "data-status": "pending" },
    el("div", { class: "placeholder", role: "img", "aria-label": "Photo loading" }));
}

/** Changes only the items whose state changed, so images already shown do not flicker. */
function renderGrid(photos) {
  const existing = new Map([...grid.children].map((li) => [li.dataset.id, li]));
  const items = photos.map((photo) => {
    const li = existing.get(String(photo.id));
    return li && li.dataset.status === photo.status ? li : photoItem(photo);
  });
  grid.replaceChildren(...items);
}

function renderStatus(data) {
  album.dataset.status = data.status;
  const total = data.photos.length;
  const done = data.photos.filter((p) => p.status !== "pending").length;
  let content;
  if (data.status === "downloading") {
    content = data.waiting ? el("p", { class: "banner waiting" }, data.waiting) : total === 0
      ? el("p", { class: "banner" }, "Searching for photos near this place…")
      : el("p", { class: "banner" }, "Downloading photos… ", el("span", { id: "progress-text" }, `${done} of ${total}`), " ",
        el("progress", { id: "album-progress", max: String(total), value: String(done) }, `${done} of ${total}`));
  } else if (data.status === "empty") {
    content = el("p", { class: "banner empty" }, "No photos found near this place. Try a pin near a town or a landmark.");
  } else if (data.status === "failed") {
    // data.error is a fixed phrase; no Retry when trying again cannot help (an invalid API key).
    content = el("div", { class: "banner error" }, el("p", {}, data.error || "The photos could not be downloaded."),
      ...(data.retryable === false ? [] : [el("form", { method: "post", action: `/pins/${pinID}/retry` },
        el("input", { type: "hidden", name: "_csrf", value: csrf }), el("button", { type: "submit", class: "button" }, "Retry"))]));
  } else if (total === 0) {
    content = el("p", { class: "banner empty" }, "This album is empty. Press New Collection for more photos.");
  }
  statusBox.replaceChildren(...(content ? [content] : []));
  newCollection.disabled = data.status === "downloading";
}

let refreshing = false;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    const response = await fetch(`/pins/${pinID}/album.json`, { credentials: "same-origin" });
    if (response.ok) {
      const data = await response.json();
      renderGrid(data.photos);
      renderStatus(data);
      album.dataset.ready = "true";
    }
  } catch { /* the next event or poll tries again */ }
  refreshing = false;
  if (again) { again = false; refresh(); }
}

// ----- live updates -----

let pollTimer = null;
function poll() {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(async () => {
    await refresh();
    if (album.dataset.status === "downloading") poll();
  }, 2000);
}

if ("EventSource" in window) {
  const source = new EventSource(`/pins/${pinID}/events`);
  source.addEventListener("change", refresh);
  source.addEventListener("error", () => { if (album.dataset.status === "downloading") poll(); });
} else if (album.dataset.status === "downloading") {
  poll();
}
album.dataset.live = "true";

// ----- New Collection without leaving the page -----

document.getElementById("new-collection-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  newCollection.disabled = true;
  try {
    await fetch(`/pins/${pinID}/collection`, {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
    });
  } finally {
    refresh();
  }
});

// ----- Edit: remove photos -----

editToggle.hidden = false;
editToggle.addEventListener("click", () => {
  const editing = !grid.classList.contains("editing");
  grid.classList.toggle("editing", editing);
  editToggle.textContent = editing ? "Done" : "Edit";
  editToggle.setAttribute("aria-pressed", String(editing));
});

grid.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.remove");
  if (!form) return;
  event.preventDefault();
  const li = form.closest("li");
  li.classList.add("removing");
  const id = li.dataset.id;
  try {
    const response = await fetch(`/photos/${id}`, { method: "DELETE", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
    if (!response.ok && response.status !== 404) throw new Error(String(response.status));
    li.remove();
  } catch {
    li.classList.remove("removing");
    statusBox.replaceChildren(el("p", { class: "banner error" }, "The photo could not be removed. Please try again."));
  }
});

// The album page: live placeholders (Server-Sent Events, polling as the fallback), New Collection,
// Edit mode to remove photos, and the small map of the pin.
// No static imports: the live updates run as soon as this file is parsed, without waiting for the
// small map's dozen modules (loaded when it is drawn).

document.documentElement.classList.add("js");
const album = document.getElementById("album");
const pinID = album.dataset.pin;
const csrf = album.dataset.csrf;
// A share link's visitor reads the album under the link (/s/TOKEN/…) and has no controls.
const base = album.dataset.base || `/pins/${pinID}`;
const grid = document.getElementById("photo-grid");
const statusBox = document.getElementById("album-status");
const newCollection = document.getElementById("new-collection");
const eraShow = document.getElementById("era-show");
// Ordered by date taken (?sort=taken): the grid is fetched in that order, never taken from a
// stream's fragment, which is in the album's own order.
const order = new URLSearchParams(location.search).get("sort") === "taken" ? "?sort=taken" : "";
const editToggle = document.getElementById("edit-toggle");

// ----- patching the page with the server's fragment -----
// The server draws the banner and the grid (GET /pins/:id/album.html, the same code as the page);
// this script only swaps in what changed, so images already shown do not flicker.

function patch(markup) {
  const template = document.createElement("template");
  template.innerHTML = markup;
  const fresh = template.content;
  const freshStatus = fresh.getElementById("album-status");
  const freshGrid = fresh.getElementById("photo-grid");
  if (!freshStatus || !freshGrid) return false;
  const existing = new Map([...grid.children].map((li) => [li.dataset.id, li]));
  const items = [...freshGrid.children].map((li) => {
    const old = existing.get(li.dataset.id);
    return old && old.dataset.status === li.dataset.status ? old : li;
  });
  // Moving the element that has focus blurs it: note where focus was and put it back.
  const focusedLi = grid.contains(document.activeElement) ? document.activeElement.closest("li") : null;
  const focusedIsRemove = focusedLi && document.activeElement.closest(".remove") !== null;
  // Only what changed is touched: a tile whose status changed is swapped, the rest stay in place
  // (replacing all thirty restyles and lays out the whole grid in the frame that shows the album's
  // first photo; docs/performance.md, "Albums", pindrop).
  const wanted = new Set(items);
  for (const li of [...grid.children]) if (!wanted.has(li)) li.remove();
  let cursor = grid.firstElementChild;
  for (const li of items) {
    if (li === cursor) cursor = cursor.nextElementSibling;
    else grid.insertBefore(li, cursor);
  }
  watchFirst();
  if (focusedLi && focusedLi.isConnected && !focusedLi.contains(document.activeElement)) {
    (focusedIsRemove ? focusedLi.querySelector(".remove button") : focusedLi.querySelector("a"))?.focus();
  }
  statusBox.replaceChildren(...freshStatus.childNodes);
  album.dataset.status = freshStatus.dataset.status;
  // "collection 2 of 40" follows New Collection without a reload.
  const pageInfo = document.getElementById("album-page-info");
  if (pageInfo && freshStatus.dataset.pageInfo !== undefined) pageInfo.textContent = freshStatus.dataset.pageInfo;
  if (newCollection) newCollection.disabled = album.dataset.status === "downloading";
  if (eraShow) eraShow.disabled = album.dataset.status === "downloading";
  album.dataset.ready = "true";
  smallMapWhenFree();
  return true;
}

function showError(message) {
  const banner = document.createElement("p");
  banner.className = "banner error";
  banner.textContent = message;
  statusBox.replaceChildren(banner);
}

let refreshing = false;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  held = null;  // what it fetches is newer
  try {
    const response = await fetch(`${base}/album.html${order}`, { credentials: "same-origin" });
    if (response.ok) patch(await response.text());
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

// While the album's first photo arrives, later changes wait until it is painted (at most 300 ms),
// and only the newest is patched: patching the grid meanwhile (new tiles, their images fetched
// and decoded) holds up its load and paint (docs/performance.md, "Albums", pindrop).
// "Painted" is a frame after its load event: an image counts as complete once fetched, before
// it is decoded or drawn.
let held = null;
let firstShown = grid.querySelector("img") !== null;  // photos already in the page
let firstWatched = false;
function watchFirst() {
  if (!grid.querySelector("img")) { firstShown = firstWatched = false; return; }  // a new collection
  if (firstShown || firstWatched) return;
  firstWatched = true;
  const shown = () => { firstShown = true; patchHeld(); };
  // Two frames: the first paints it (its decode and raster follow on other threads).
  const afterFrame = () => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(shown, 0)));
  const first = grid.querySelector("img");
  first.addEventListener("load", afterFrame, { once: true });
  first.addEventListener("error", afterFrame, { once: true });
  setTimeout(shown, 300);
}
function patchHeld() {
  if (held === null) return;
  const markup = held;
  held = null;
  patch(markup);
}
// The owner's stream carries the fragment itself (what album.html answers): patched at once, no
// round trip. A change without it (a share link's stream, a server that could not read the album)
// is fetched.
function changed(event) {
  const fragment = !order && event.data.startsWith("<");
  if (fragment && firstWatched && !firstShown) {
    held = event.data;
    return;
  }
  held = null;
  if (!(fragment && patch(event.data))) refresh();
}

if ("EventSource" in window) {
  const source = new EventSource(`${base}/events`);
  source.addEventListener("change", changed);
  source.addEventListener("error", () => { if (album.dataset.status === "downloading") poll(); });
} else if (album.dataset.status === "downloading") {
  poll();
}
album.dataset.live = "true";

// ----- the small map -----
// While an album downloads, its first photo comes first: the map (a dozen modules, its cells, and
// frames of 50 ms on a slow machine) waits until a photo has loaded or the download has ended, and
// then for an idle moment; drawn earlier, its frames held up the first thumbnail's patch and paint
// (script/bench pindrop). At the latest after ten seconds.
const mapCanvas = document.getElementById("album-map");
let mapDrawn = false;
const drawWhenLoaded = () => smallMapWhenFree();
function smallMapWhenFree(force = false) {
  if (!mapCanvas || mapDrawn) return;
  const first = grid.querySelector("img");
  if (!force && album.dataset.status === "downloading" && !(first && first.complete && first.naturalWidth > 0)) {
    first?.addEventListener("load", drawWhenLoaded, { once: true });  // one listener, however many patches ask
    return;
  }
  mapDrawn = true;
  if ("requestIdleCallback" in window) requestIdleCallback(drawSmallMap, { timeout: 1000 });
  else setTimeout(drawSmallMap, 0);
}
async function drawSmallMap() {
  const [{ MapView }, { PinLayer }] = await Promise.all([import("./map.js"), import("./pins.js")]);
  const small = new MapView(mapCanvas, { lat: Number(mapCanvas.dataset.lat), lon: Number(mapCanvas.dataset.lon), zoom: 8, interactive: false });
  const pinLayer = new PinLayer();
  pinLayer.set([{ id: Number(pinID), lat: Number(mapCanvas.dataset.lat), lon: Number(mapCanvas.dataset.lon) }]);
  small.layers.push(pinLayer);
  small.redraw();
}
if (mapCanvas) {  // not on a share link that hides the location
  if (album.dataset.status === "downloading") {
    smallMapWhenFree();
    setTimeout(() => smallMapWhenFree(true), 10000);
  } else {
    mapDrawn = true;
    drawSmallMap();
  }
}

// ----- New Collection without leaving the page -----

document.getElementById("new-collection-form")?.addEventListener("submit", async (event) => {
  event.preventDefault();
  newCollection.disabled = true;
  let refused = false;
  try {
    const response = await fetch(`/pins/${pinID}/collection`, {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
    });
    // A quota (429) says why in words: show them, and keep the album as it is.
    if (response.status === 429) {
      refused = true;
      newCollection.disabled = false;
      showError((await response.json()).error);
    }
    // The button is disabled while the new photos download: focus moves to the status it
    // announces, rather than falling back to the page.
    statusBox.tabIndex = -1;
    statusBox.focus();
  } finally {
    if (!refused) refresh();
  }
});

// ----- Edit: remove photos -----

if (editToggle) editToggle.hidden = false;
editToggle?.addEventListener("click", () => {
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
  // Focus goes to the next photo's Remove (or the previous one's, or Done), never to the page's
  // top. Found again by id afterwards: a live update may have redrawn the grid meanwhile.
  const hadFocus = li.contains(document.activeElement);
  const siblings = [...grid.children];
  const at = siblings.indexOf(li);
  const neighbour = [...siblings.slice(at + 1), ...siblings.slice(0, at).reverse()]
    .find((other) => other.querySelector(".remove button"))?.dataset.id;
  try {
    const response = await fetch(`/photos/${id}`, { method: "DELETE", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
    if (!response.ok && response.status !== 404) throw new Error(String(response.status));
    li.remove();
    grid.querySelector(`li[data-id="${id}"]`)?.remove();
    if (hadFocus) (grid.querySelector(`li[data-id="${neighbour}"] .remove button`) || editToggle).focus();
  } catch {
    li.classList.remove("removing");
    showError("The photo could not be removed. Please try again.");
  }
});

// ----- When: the years are asked for only with "Years…" (without this script they are always shown) -----
{
  const when = document.getElementById("era-when");
  const years = document.querySelector("#era-form .era-years");
  if (when && years) {
    const sync = () => { years.hidden = when.value !== "years"; };
    when.addEventListener("change", sync);
    sync();
  }
  // With this script the choice is taken at once (a POST with the token, as New Collection), and
  // the album page comes back with it; a refused choice is said beside the form.
  document.getElementById("era-form")?.addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const help = document.getElementById("era-help");
    const response = await fetch(`/pins/${pinID}/collection`, {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, Accept: "application/json" },
      body: new URLSearchParams(new FormData(form)),
    }).catch(() => null);
    if (response && response.status < 300) {
      location.assign(`/pins/${pinID}`);
    } else if (help) {
      const answer = response ? await response.json().catch(() => null) : null;
      help.textContent = answer && answer.error ? answer.error
        : response && response.status === 409 ? "This album is still downloading: choose again when it is complete."
        : "The choice could not be sent. Please try again.";
      help.classList.add("field-error");
    }
  });
}

// ----- the strip of decades: counted on the first look (…/decades?fragment=1), kept after -----
// Without this script the strip's link opens the same counts on a page of their own.
{
  const fetchStrip = async (tries) => {
    const strip = document.querySelector("#decades[data-count]");
    if (!strip) return;
    try {
      const answer = await fetch(strip.dataset.count, { headers: { Accept: "text/html" } });
      if (!answer.ok) return;
      const template = document.createElement("template");
      template.innerHTML = (await answer.text()).trim();
      const fresh = template.content.querySelector("#decades");
      if (!fresh) return;
      strip.replaceWith(fresh);
      const live = document.getElementById("decades-status");
      const note = fresh.querySelector(".decades-note");
      if (live) live.textContent = note ? note.textContent : "";
      // Still counting (the provider is slow): look again a few times.
      if (fresh.dataset.count && tries > 1) setTimeout(() => fetchStrip(tries - 1), 4000);
    } catch {
      // Offline or the server busy: the link still works.
    }
  };
  fetchStrip(3);
}

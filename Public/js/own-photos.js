// A person's own photos, on an album page ("Add your photos here") or on the map ("Add photos"):
// each file is its own request (a failure loses only that file), two at a time, with its progress
// and a Retry for a file that failed. Files come from the form's file input or are dropped: on
// the album page anywhere; on the map, a photo without a position goes where it was dropped.
// Without this script the form sends them all.
const form = document.getElementById("own-upload");

if (form) {
  const input = document.getElementById("own-files");
  const progress = document.getElementById("own-upload-progress");
  const grid = document.getElementById("own-grid");
  const csrf = form.querySelector("input[name=_csrf]").value;
  const maxBytes = Number(form.dataset.maxBytes) || Infinity;
  const url = form.getAttribute("action");
  const onMap = form.dataset.target === "map";
  const queue = [];
  // Files to send once more when the rest of the batch is in (see `later` in the answer).
  const deferred = [];
  let running = 0;
  let batch = { total: 0, added: 0, failed: 0, already: 0 };

  const summary = document.createElement("p");
  summary.className = "own-summary";
  const list = document.createElement("ul");
  list.className = "own-files";
  progress.append(summary, list);

  function showSummary() {
    const done = batch.added + batch.failed + batch.already;
    const parts = [`${batch.added} of ${batch.total} added`];
    if (batch.already) parts.push(`${batch.already} already here`);
    if (batch.failed) parts.push(`${batch.failed} not added`);
    summary.textContent = (done < batch.total ? "Adding photos: " : "Done: ") + parts.join(", ") + ".";
  }

  function row(file) {
    const item = document.createElement("li");
    const name = document.createElement("span");
    name.className = "own-file-name";
    name.textContent = file.name;
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", `${file.name}: sent`);
    const status = document.createElement("span");
    status.className = "own-file-status muted";
    status.textContent = "waiting";
    item.append(name, " ", bar, " ", status);
    list.append(item);
    return { item, bar, status };
  }

  function settle(task, outcome, message) {
    task.ui.status.textContent = message;
    task.ui.item.dataset.outcome = outcome;
    if (outcome === "failed") {
      batch.failed += 1;
      const retry = document.createElement("button");
      retry.type = "button";
      retry.className = "link-button";
      retry.textContent = "Retry";
      retry.setAttribute("aria-label", `Retry ${task.file.name}`);
      retry.addEventListener("click", () => {
        retry.remove();
        batch.failed -= 1;
        task.ui.item.dataset.outcome = "";
        task.ui.bar.value = 0;
        task.ui.status.textContent = "waiting";
        task.busyRetries = 0;
        task.networkRetries = 0;
        queue.push(task);
        showSummary();
        pump();
      });
      task.ui.item.append(" ", retry);
    } else if (outcome === "added") {
      batch.added += 1;
    } else {
      batch.already += 1;
    }
    showSummary();
  }

  function send(task) {
    running += 1;
    task.ui.status.textContent = "sending";
    const request = new XMLHttpRequest();
    // On the map: the map the page was drawn for, and where a photo was dropped.
    const query = new URLSearchParams();
    const map = form.querySelector("input[name=map]");
    if (map) query.set("map", map.value);
    if (form.querySelector("input[name=estimate]")?.checked) query.set("estimate", "1");
    if (task.point) { query.set("lat", task.point.lat.toFixed(6)); query.set("lon", task.point.lon.toFixed(6)); }
    request.open("POST", query.toString() ? `${url}?${query}` : url);
    request.setRequestHeader("X-CSRF-Token", csrf);
    request.setRequestHeader("X-File-Name", encodeURIComponent(task.file.name));
    request.setRequestHeader("Accept", "application/json");
    request.setRequestHeader("Content-Type", task.file.type || "application/octet-stream");
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) task.ui.bar.value = Math.round((event.loaded / event.total) * 100);
      if (event.loaded === event.total) task.ui.status.textContent = "making its versions";
    });
    request.addEventListener("load", () => {
      running -= 1;
      let answer = null;
      try { answer = JSON.parse(request.responseText); } catch { answer = null; }
      if (request.status === 503 && task.busyRetries < 30) {
        // The server's processing line is full: this file goes again shortly, by itself.
        task.busyRetries += 1;
        task.ui.status.textContent = "waiting for the server";
        const seconds = Number(request.getResponseHeader("Retry-After")) || 2;
        later(task, seconds * 1000);
      } else if (answer && answer.later && !task.deferred) {
        // No place yet: it may stand beside the batch's photos with a position once they are in.
        task.deferred = true;
        task.ui.status.textContent = "waiting for the rest of the batch";
        deferred.push(task);
      } else if (answer && answer.added) {
        task.ui.bar.value = 100;
        const vt = window.virtualTourist;
        if (onMap && answer.pin && vt) {
          // The pin it went to, new or near: shown at once (the live stream tells other members).
          if (!vt.pins.pins.some((p) => p.id === answer.pin.id)) vt.pins.add(answer.pin);
          if (answer.newPin && vt.listAdd) vt.listAdd(answer.pin);
          vt.map.redrawLayers();
        }
        if (answer.figure && grid) {
          const template = document.createElement("template");
          template.innerHTML = answer.figure;
          const item = document.createElement("li");
          item.className = "photo own";
          item.dataset.id = answer.id;
          item.append(template.content);
          grid.append(item);
          document.getElementById("own-photos-empty")?.remove();
        }
        settle(task, "added", onMap ? answer.message : "added");
      } else if (answer && request.status < 300) {
        settle(task, "already", answer.message);
      } else {
        settle(task, "failed", answer ? answer.message : `${task.file.name} was not added (the server answered ${request.status}).`);
      }
      pump();
    });
    request.addEventListener("error", () => {
      running -= 1;
      // A dropped connection (the server refusing a body it has no room for closes it): tried
      // again by itself, a few times, a little later each time.
      if (task.networkRetries < 3) {
        task.networkRetries += 1;
        task.ui.status.textContent = "connection lost, trying again";
        later(task, 2000 * task.networkRetries);
      } else {
        settle(task, "failed", `${task.file.name} was not sent: the connection failed.`);
      }
      pump();
    });
    request.send(task.file);
  }

  // A file sent again shortly (a full line, a lost connection).
  let waiting = 0;
  function later(task, milliseconds) {
    waiting += 1;
    setTimeout(() => { waiting -= 1; queue.unshift(task); pump(); }, milliseconds);
  }

  function pump() {
    while (running < 2 && queue.length) send(queue.shift());
    if (running === 0 && waiting === 0 && !queue.length && deferred.length) {
      queue.push(...deferred.splice(0));
      pump();
    }
  }

  function add(files, point) {
    if (!files.length) return;
    // On the map the form is in the pin list's panel: opened, so the progress shows.
    form.closest("details")?.setAttribute("open", "");
    if (batch.added + batch.failed + batch.already >= batch.total) batch = { total: 0, added: 0, failed: 0, already: 0 };
    for (const file of files) {
      batch.total += 1;
      const task = { file, point, ui: row(file), busyRetries: 0, networkRetries: 0 };
      if (file.size > maxBytes) {
        settle(task, "failed", `${file.name} is larger than ${Math.round(maxBytes / 1048576)} MB, the most a photo may be.`);
        continue;
      }
      queue.push(task);
    }
    showSummary();
    pump();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    add([...input.files]);
    input.value = "";
  });

  // Dropping files anywhere on the album page adds them here.
  const page = document.querySelector("main") || document.body;
  page.addEventListener("dragover", (event) => {
    if (![...event.dataTransfer.types].includes("Files")) return;
    event.preventDefault();
    form.classList.add("dropping");
  });
  page.addEventListener("dragleave", (event) => {
    if (event.target === page || !page.contains(event.relatedTarget)) form.classList.remove("dropping");
  });
  page.addEventListener("drop", (event) => {
    if (!event.dataTransfer.files.length) return;
    event.preventDefault();
    form.classList.remove("dropping");
    // On the map: where it was dropped, for the photos whose files do not say where they were taken.
    const canvas = document.getElementById("map-canvas");
    let point;
    if (onMap && canvas && window.virtualTourist && canvas.contains(event.target)) {
      const box = canvas.getBoundingClientRect();
      point = window.virtualTourist.map.screenToLonLat(event.clientX - box.left, event.clientY - box.top);
    }
    add([...event.dataTransfer.files], point);
  });
}

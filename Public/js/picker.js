// The picker: "Preview" opens the photo large in the page (a <dialog>) instead of a new tab.
document.documentElement.classList.add("js");
const dialog = document.createElement("dialog");
dialog.className = "preview-dialog";
dialog.setAttribute("aria-label", "Photo preview");
const image = document.createElement("img");
image.alt = "";
const caption = document.createElement("p");
const close = document.createElement("button");
close.type = "button";
close.className = "button";
close.textContent = "Close";
close.addEventListener("click", () => dialog.close());
dialog.append(image, caption, close);
document.body.append(dialog);
dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });

for (const link of document.querySelectorAll(".preview-link")) {
  link.addEventListener("click", (event) => {
    event.preventDefault();
    const title = link.closest(".pick").querySelector(".pick-title").textContent;
    image.src = link.href;
    image.alt = title;
    caption.textContent = title;
    dialog.showModal();
    close.focus();
  });
}

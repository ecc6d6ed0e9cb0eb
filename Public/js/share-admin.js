// The owner's share links page: a Copy button for the new link. Without script the link is
// still there to select and copy by hand.
const input = document.getElementById("new-share-url");
const button = document.getElementById("copy-share-url");
const status = document.getElementById("copy-share-status");
if (input && button && navigator.clipboard) {
  // Without PUBLIC_URL the server knows only the path: the address bar knows the rest.
  input.value = new URL(input.value, location.href).href;
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(input.value);
      status.textContent = "Copied.";
    } catch {
      input.select();
      status.textContent = "Select the link and copy it.";
    }
  });
} else if (input) {
  input.value = new URL(input.value, location.href).href;
}

// Building DOM nodes from script, the one way every page script does it.

/**
 * A new element: `attributes` are set as attributes ("class" too), except `on…` keys, which add
 * event listeners; children are nodes or strings, and strings are set as text, never parsed as
 * HTML, so nothing from a provider or a person can become markup.
 */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value); else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

// Small DOM helpers. Values reach the page as text: `el` and `svg` make text nodes, and
// `esc` escapes what the environment cards put into HTML templates.

export const $ = (id) => document.getElementById(id);

export const esc = (s) =>
  String(s ?? '—').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');

export const seconds = (ms) => Math.round(ms / 1000);

export function duration(s) {
  const abs = Math.abs(s);
  if (abs < 120) return `${s}s`;
  if (abs < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}

/** Builds an element; children that are not nodes become text nodes (never parsed as HTML). */
export function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? '—'));
  return node;
}

/** The SVG namespace, as the HTML parser gives it to an <svg> element (no URL in the assets). */
const SVG = (() => {
  const holder = document.createElement('div');
  holder.innerHTML = '<svg></svg>';
  return holder.firstChild.namespaceURI;
})();

export function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text != null) node.textContent = String(text);
  return node;
}

/** A principal's name on one line: cut with an ellipsis by the stylesheet, whole in its title. */
export function nameNode(name, tag = 'span') {
  const node = el(tag, 'name', name);
  node.title = String(name ?? '');
  return node;
}

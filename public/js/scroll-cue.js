// A box wider content scrolls inside (class `scroll-x`) is marked data-overflow while it
// holds more than it shows, and data-at-end once scrolled to its right edge: the
// stylesheet draws a shadow and a "scroll →" tag on that edge.

const watched = new WeakSet();

function mark(box) {
  const more = box.scrollWidth - box.clientWidth > 1;
  box.toggleAttribute('data-overflow', more);
  box.toggleAttribute('data-at-end', more && box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
}

const resized = new ResizeObserver((entries) => entries.forEach((entry) => mark(entry.target)));

/** Marks every `.scroll-x` box under `root` now and whenever it resizes or scrolls. */
export function watchScroll(root = document) {
  for (const box of root.querySelectorAll('.scroll-x')) {
    if (!watched.has(box)) {
      watched.add(box);
      resized.observe(box);
      box.addEventListener('scroll', () => mark(box), { passive: true });
    }
    mark(box);
  }
}

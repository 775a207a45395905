import Sqlite from 'better-sqlite3';
const proto = Object.getPrototypeOf(new Sqlite(':memory:').prepare('select 1'));
const stats = new Map();
for (const m of ['run', 'all', 'get']) { const orig = proto[m]; proto[m] = function (...a) { const t = process.hrtime.bigint(); try { return orig.apply(this, a); } finally { const d = Number(process.hrtime.bigint() - t) / 1000; const k = this.source.replace(/\s+/g, ' ').slice(0, 90); const s = stats.get(k) ?? [0, 0]; s[0]++; s[1] += d; stats.set(k, s); } }; }
process.on('exit', () => { const arr = [...stats.entries()].sort((a, b) => b[1][1] - a[1][1]).slice(0, 25); for (const [k, [n, us]] of arr) console.log(String(n).padStart(6), (us / n).toFixed(1).padStart(7), 'us', k); });

import './.stmt.mjs';
// scratch: in-process CPU cost per request (not committed)
import { createApp } from './dist/src/app.js';
import { loadConfig } from './dist/src/config/config.js';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { pino } from 'pino';
const t = JSON.parse(process.argv[2]); const mode = process.argv[3]; const n = Number(process.argv[4] ?? 3000); const prof = process.argv[5];
for (const s of ['', '-wal', '-shm']) rmSync('/tmp/prof/ip.db' + s, { force: true });
copyFileSync('/tmp/prof/publish.db', '/tmp/prof/ip.db');
const config = loadConfig({ DATABASE_URL: 'sqlite:/tmp/prof/ip.db', PLANFENCE_ADMIN_TOKEN: 'pf_fault_harness_admin_token_000', PLANFENCE_SQLITE_SYNCHRONOUS: process.env.SYNC ?? 'FULL' });
const logger = pino({ level: 'info' }, pino.destination('/dev/null'));
const app = await createApp(config, { logger });
const f = app.getHttpAdapter().getInstance(); await f.ready();
let k = 0;
const body = () => mode === 'whoami' ? JSON.stringify({ query: '{ whoami { name role } }' }) : JSON.stringify({ query: 'mutation($input: SubmitPlanInput!) { submitPlan(input: $input) { id status } }', variables: { input: { environment: t.environments[0], generation: t.fresh, idempotencyKey: `ip${k++}`, content: 'x'.repeat(300) } } });
const one = () => f.inject({ method: 'POST', url: '/graphql', headers: { 'content-type': 'application/json', authorization: `Bearer ${t.agentToken}` }, payload: body() });
for (let i = 0; i < 300; i++) { const r = await one(); if (i === 0 && r.statusCode !== 200) console.log(r.body); }
const conc = Number(process.env.CONC ?? 1);
let session; if (prof) { session = new Session(); session.connect(); await session.post('Profiler.enable'); await session.post('Profiler.start'); }
const c0 = process.cpuUsage(); const w0 = performance.now();
let done = 0;
await Promise.all(Array.from({ length: conc }, async () => { while (done < n) { done++; const r = await one(); if (!r.body.includes('"data":{')) { console.log(r.body); process.exit(1); } } }));
const c1 = process.cpuUsage(c0); const w1 = performance.now();
if (prof) { const { profile } = await session.post('Profiler.stop'); writeFileSync(prof, JSON.stringify(profile)); }
console.log(`${mode} conc=${conc} cpu_us_per_req=${((c1.user + c1.system) / n).toFixed(0)} wall_us_per_req=${((w1 - w0) * 1000 / n).toFixed(0)}`);
await app.close();

// A WebSocket attacker in a process of its own, so that what the test measures (/health of
// the service in the test's process) is not slowed by the attacker's own sending and parsing.
// Usage: node ws-attacker.mjs '<json options>'
//   { url, token, sockets, perSocket, query, variables, until: 'answers' | { events: n } | 'killed' }
// Prints one JSON line when it is done: { answers: {next, error, codes}, events, closed: [codes] }.
import WebSocket from 'ws';

const options = JSON.parse(process.argv[2]);
const summary = { next: 0, error: 0, codes: {}, events: 0, closed: [] };
const answered = new Set();
const total = options.sockets * options.perSocket;

function done() {
  process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
}

function check() {
  if (options.until === 'answers' && answered.size >= total) done();
  if (options.until?.events && summary.events >= options.until.events) done();
}

async function open(index) {
  const ws = new WebSocket(`${options.url.replace('http', 'ws')}/graphql`, 'graphql-transport-ws');
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.on('close', (code) => {
    summary.closed.push(code);
  });
  const acked = new Promise((resolve) => {
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString());
      if (frame.type === 'connection_ack') return resolve();
      if (frame.type === 'ping') return ws.send(JSON.stringify({ type: 'pong' }));
      const key = `${index}/${frame.id}`;
      if (frame.type === 'next') summary.events++;
      if ((frame.type === 'next' || frame.type === 'error') && !answered.has(key)) {
        answered.add(key);
        summary[frame.type]++;
        if (frame.type === 'error') {
          const code = frame.payload?.[0]?.extensions?.code ?? 'none';
          summary.codes[code] = (summary.codes[code] ?? 0) + 1;
        }
      }
      check();
    });
  });
  ws.send(
    JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${options.token}` } }),
  );
  await acked;
  return ws;
}

process.on('SIGTERM', done);

const sockets = [];
for (let i = 0; i < options.sockets; i++) sockets.push(await open(i));
process.stdout.write('ready\n');
for (const ws of sockets) {
  for (let i = 0; i < options.perSocket; i++) {
    ws.send(
      JSON.stringify({
        id: `s${i}`,
        type: 'subscribe',
        payload: { query: options.query, variables: options.variables ?? {} },
      }),
    );
  }
}
check();

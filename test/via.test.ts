/**
 * The door a decision records: mcp inside a tool call, graphql for every other request,
 * whatever ran before or beside it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { currentVia, throughMcp } from '../src/common/via.js';

test('a tool call is the mcp door until it ends, across its awaits; outside it is graphql', async () => {
  expect(currentVia()).toBe('graphql');
  const seen = await throughMcp(async () => {
    const first = currentVia();
    await sleep(5);
    return [first, currentVia()];
  });
  expect(seen).toEqual(['mcp', 'mcp']);
  expect(currentVia()).toBe('graphql');
});

test('overlapping tool calls keep their door while a request beside them keeps its own', async () => {
  const events: string[] = [];
  const long = throughMcp(async () => {
    await sleep(30);
    events.push(`long ${currentVia()}`);
  });
  const short = throughMcp(async () => {
    await sleep(5);
    events.push(`short ${currentVia()}`);
  });
  const beside = (async () => {
    await sleep(15);
    events.push(`request ${currentVia()}`);
  })();
  await Promise.all([long, short, beside]);
  expect(events).toEqual(['short mcp', 'request graphql', 'long mcp']);
  // Once none is in flight the storage is off, and the next tool call turns it on again.
  expect(currentVia()).toBe('graphql');
  expect(await throughMcp(() => Promise.resolve(currentVia()))).toBe('mcp');
});

// One graphql-ws subscription (activityRecorded) whatever the number of environments.

import { token } from './api.js';
import { setStatus } from './status.js';

const ACTIVITY = 'subscription { activityRecorded { id environment action outcome planId generation } }';

let socket = null;

/**
 * Opens the activity subscription; resolves once it is asked for (or the socket failed), so
 * that a load started afterwards misses no event: what happens during the load arrives as an
 * event too, and refreshing twice is harmless. `onEvent(event)` gets every event;
 * `onLost()` is called when this socket closes while still the current one.
 */
export function connect(onEvent, onLost) {
  if (socket) socket.close();
  let subscribed;
  const asked = new Promise((resolve) => {
    subscribed = resolve;
  });
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
  const ws = new WebSocket(url, 'graphql-transport-ws');
  socket = ws;
  ws.addEventListener('open', () =>
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token()}` } })));
  ws.addEventListener('message', (message) => {
    const msg = JSON.parse(message.data);
    if (msg.type === 'connection_ack') {
      ws.send(JSON.stringify({ id: 'activity', type: 'subscribe', payload: { query: ACTIVITY } }));
      // "live" once the environments are loaded too (main.js).
      setStatus('loading…');
      subscribed();
    } else if (msg.type === 'next') {
      const event = msg.payload && msg.payload.data && msg.payload.data.activityRecorded;
      if (event) onEvent(event);
    } else if (msg.type === 'error') {
      setStatus(`error: ${(msg.payload && msg.payload[0] && msg.payload[0].message) || 'subscription refused'}`);
    } else if (msg.type === 'ping') {
      ws.send(JSON.stringify({ type: 'pong' }));
    }
  });
  ws.addEventListener('close', () => {
    subscribed();
    if (socket !== ws) return;
    setStatus('reconnecting…');
    onLost();
  });
  return asked;
}

/** Whether the subscription's socket is open (the page hears every event). */
export function listening() {
  return socket !== null && socket.readyState === WebSocket.OPEN;
}

/** Closes the subscription for good (signed out): no reconnect. */
export function disconnect() {
  if (!socket) return;
  const ws = socket;
  socket = null;
  ws.close();
}

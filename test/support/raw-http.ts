import { once } from 'node:events';
import { connect, type Socket } from 'node:net';

export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** A raw TCP connection to the service that records what it sends and when it closes. */
export async function rawConnection(url: string): Promise<{
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
}> {
  const socket = connect(portOf(url), '127.0.0.1');
  let data = '';
  socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
  socket.on('error', () => undefined);
  // A reset (ECONNRESET) is also a close: the error is swallowed above.
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await once(socket, 'connect');
  return { socket, received: () => data, closed };
}

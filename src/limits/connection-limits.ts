import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * At most `max` open connections from one client address (IPv4-mapped IPv6 counted as the
 * IPv4 address): one more is destroyed as soon as it is accepted, before a byte is read,
 * so that one client holding many slow connections cannot take the whole
 * PLANFENCE_MAX_CONNECTIONS from the others. A closed connection frees its place.
 */
export function limitConnectionsPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const count = open.get(address) ?? 0;
    if (count >= max) {
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

import { Logger } from '@nestjs/common';
import { errorCodes, type FastifyInstance } from 'fastify';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { Counter, type Registry } from 'prom-client';
import { jsonBodyWorkerMain } from './json-body-worker.js';
import { LARGE_BODY_BYTES } from './large-bodies.js';
import { workerSource } from '../common/worker-source.js';

type Reply = { id: number; value?: unknown; invalid?: true };

/** After the thread fails, large bodies are parsed on the request thread this long before it is started again. */
const RETRY_AFTER_MS = 10_000;

/**
 * A thread of the service's own that decodes and parses JSON request bodies larger than
 * LARGE_BODY_BYTES (src/limits/json-body-worker.ts). Started at the first such body, ended
 * with the service.
 */
class JsonBodyThread {
  private readonly logger = new Logger('Requests');
  private worker: Worker | null = null;
  /** Until when (performance.now()) the thread is not started again, after it failed. */
  private restUntil = 0;
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (reply: Reply) => void; reject: (error: Error) => void }
  >();

  constructor(
    private readonly workerData: Record<string, string>,
    /** The thread's heap limit: a smaller heap is collected sooner, so parsed bodies' copies do not pile up in it. */
    private readonly heapMb: number,
  ) {}

  /** The parsed body, or `{ invalid: true }`; rejects only when the thread itself failed. */
  parse(bytes: Buffer): Promise<Reply> {
    if (!this.worker && performance.now() < this.restUntil)
      return Promise.reject(new Error('the JSON body thread failed a moment ago'));
    const worker = (this.worker ??= this.start());
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // A copy (structured clone): the body stays readable here should the thread fail.
      worker.postMessage({ id, bytes });
    });
  }

  private start(): Worker {
    const worker = new Worker(workerSource(jsonBodyWorkerMain), {
      eval: true,
      workerData: this.workerData,
      resourceLimits: { maxOldGenerationSizeMb: this.heapMb },
    });
    worker.unref();
    worker.on('message', (reply: Reply) => {
      this.pending.get(reply.id)?.resolve(reply);
      this.pending.delete(reply.id);
    });
    const failed = (error: Error) => {
      if (this.worker === worker) {
        this.worker = null;
        this.restUntil = performance.now() + RETRY_AFTER_MS;
        this.logger.warn(
          `the JSON body thread stopped (${error.message.split('\n')[0]}): bodies over ${LARGE_BODY_BYTES / 1024} KiB are parsed on the request thread for ${RETRY_AFTER_MS / 1000} s`,
        );
      }
      for (const waiting of this.pending.values()) waiting.reject(error);
      this.pending.clear();
    };
    worker.on('error', failed);
    worker.on('exit', () => failed(new Error('the JSON body thread exited')));
    return worker;
  }

  async stop(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }
}

/**
 * The service's `application/json` parser: Fastify's own (secure-json-parse, with the
 * server's settings for `__proto__` and `constructor` keys), with the same answers to every
 * body, but a body larger than LARGE_BODY_BYTES is decoded and parsed on a thread of its
 * own. A 1 MiB plan's body took the request thread 10–15 ms in one piece; now it takes the
 * copy of the bytes there and of the parsed value back. Should that thread fail, the body is
 * parsed here, as before.
 */
export function parseLargeJsonBodiesAside(
  fastify: FastifyInstance,
  /** The thread's parser module: by default the secure-json-parse that Fastify itself uses. */
  parser = createRequire(createRequire(import.meta.url).resolve('fastify')).resolve(
    'secure-json-parse',
  ),
): LargeJsonBodies {
  const counts: LargeJsonBodies = { aside: 0, here: 0 };
  const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = fastify.initialConfig;
  const parseHere = fastify.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  // A body's bytes, its text and its parsed strings: up to four times its size (two-byte
  // text). A body the thread has no room for is parsed here.
  const heapMb = Math.ceil((4 * fastify.initialConfig.bodyLimit!) / 2 ** 20) + 16;
  const thread = new JsonBodyThread(
    { parser, protoAction: onProtoPoisoning, constructorAction: onConstructorPoisoning },
    heapMb,
  );
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer' },
    (request, body: Buffer, done) => {
      if (body.length <= LARGE_BODY_BYTES) return parseHere(request, body.toString('utf8'), done);
      void thread.parse(body).then(
        (reply) => {
          counts.aside++;
          if (reply.invalid) done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined);
          else done(null, reply.value);
        },
        () => {
          counts.here++;
          void parseHere(request, body.toString('utf8'), done);
        },
      );
    },
  );
  fastify.addHook('onClose', async () => thread.stop());
  return counts;
}

/** Large JSON bodies parsed so far: on the thread, and on the request thread after it failed. */
export interface LargeJsonBodies {
  aside: number;
  here: number;
}

/** `planfence_large_json_bodies_total{parsed="thread"|"request_thread"}`. */
export function largeJsonBodiesCounter(registry: Registry, counts: LargeJsonBodies): void {
  new Counter({
    name: 'planfence_large_json_bodies_total',
    help: `JSON request bodies over ${LARGE_BODY_BYTES / 1024} KiB, by where they were parsed: on the service's JSON body thread, or on the request thread because that thread had failed`,
    labelNames: ['parsed'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ parsed: 'thread' }, counts.aside);
      this.inc({ parsed: 'request_thread' }, counts.here);
    },
  });
}

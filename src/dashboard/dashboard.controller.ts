import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Controller, Get, Header, HttpException, HttpStatus, Param } from '@nestjs/common';

/** public/ sits at the project root, above src/ (sources) and dist/src/ (build). */
function publicFile(name: string): string {
  for (const base of ['../../public/', '../../../public/']) {
    const url = new URL(`${base}${name}`, import.meta.url);
    if (existsSync(url)) return readFileSync(url, 'utf8');
  }
  throw new Error(`dashboard asset ${name} not found`);
}

/**
 * The console's ES modules (public/js/), one job each. Only these names are served: a
 * request names a key of this list, never a path, so nothing else under public/ or
 * beyond it can be reached.
 */
export const CONSOLE_MODULES = [
  'api.js',
  'dom.js',
  'status.js',
  'role.js',
  'scroll-cue.js',
  'environments.js',
  'rejections.js',
  'timeline.js',
  'deployment-panel.js',
  'queue.js',
  'plan-view.js',
  'subscription.js',
  'slack-link.js',
  'main.js',
] as const;

/** The `diff` package's browser build (BSD-3-Clause), served from node_modules with its licence named. */
function diffLibrary(): string {
  const require = createRequire(import.meta.url);
  const packageJson = require.resolve('diff/package.json');
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string };
  const code = readFileSync(new URL('./dist/diff.min.js', `file://${packageJson}`), 'utf8');
  return `/*! diff ${version} | BSD-3-Clause | https://github.com/kpdecker/jsdiff */\n${code}`;
}

/**
 * The dashboard and reviewer's console: a few small static files and the vendored `diff`
 * library, no CDN. Data comes from /graphql with the signed-in token.
 */
@Controller()
export class DashboardController {
  private readonly html = publicFile('index.html');
  private readonly modules = new Map<string, string>(
    CONSOLE_MODULES.map((name) => [name, publicFile(`js/${name}`)]),
  );
  private readonly style = publicFile('dashboard.css');
  private readonly diff = diffLibrary();

  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  index(): string {
    return this.html;
  }

  @Get('js/:name')
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'no-cache')
  module(@Param('name') name: string): string {
    const code = this.modules.get(name);
    if (code === undefined) throw new HttpException('Not Found', HttpStatus.NOT_FOUND);
    return code;
  }

  @Get('vendor/diff.min.js')
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'public, max-age=86400')
  diffJavascript(): string {
    return this.diff;
  }

  @Get('dashboard.css')
  @Header('content-type', 'text/css; charset=utf-8')
  @Header('cache-control', 'no-cache')
  css(): string {
    return this.style;
  }
}

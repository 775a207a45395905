import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Controller, Get, Header } from '@nestjs/common';

/** public/ sits at the project root, above src/ (sources) and dist/src/ (build). */
function publicFile(name: string): string {
  for (const base of ['../../public/', '../../../public/']) {
    const url = new URL(`${base}${name}`, import.meta.url);
    if (existsSync(url)) return readFileSync(url, 'utf8');
  }
  throw new Error(`dashboard asset ${name} not found`);
}

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
  private readonly script = publicFile('dashboard.js');
  private readonly consoleScript = publicFile('console.js');
  private readonly style = publicFile('dashboard.css');
  private readonly diff = diffLibrary();

  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  index(): string {
    return this.html;
  }

  @Get('dashboard.js')
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'no-cache')
  javascript(): string {
    return this.script;
  }

  @Get('console.js')
  @Header('content-type', 'text/javascript; charset=utf-8')
  @Header('cache-control', 'no-cache')
  consoleJavascript(): string {
    return this.consoleScript;
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

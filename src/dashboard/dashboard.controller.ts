import { existsSync, readFileSync } from 'node:fs';
import { Controller, Get, Header } from '@nestjs/common';

/** public/ sits at the project root, above src/ (sources) and dist/src/ (build). */
function publicFile(name: string): string {
  for (const base of ['../../public/', '../../../public/']) {
    const url = new URL(`${base}${name}`, import.meta.url);
    if (existsSync(url)) return readFileSync(url, 'utf8');
  }
  throw new Error(`dashboard asset ${name} not found`);
}

/** The read-only dashboard: three small static files, no CDN. Data comes from /graphql with a VIEWER token. */
@Controller()
export class DashboardController {
  private readonly html = publicFile('index.html');
  private readonly script = publicFile('dashboard.js');
  private readonly style = publicFile('dashboard.css');

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

  @Get('dashboard.css')
  @Header('content-type', 'text/css; charset=utf-8')
  @Header('cache-control', 'no-cache')
  css(): string {
    return this.style;
  }
}

/**
 * @nestjs/common builds two `Intl.DateTimeFormat`s as it loads (its console loggers'
 * timestamps). The first one the process builds reads ICU's locale, calendar and time-zone
 * data: about 6 MiB more resident for the whole life of the service, which logs through pino
 * and never formats those timestamps. This module is main's first import: until
 * `restoreIntl()`, a `new Intl.DateTimeFormat(...)` returns a stand-in that builds the real
 * formatter on its first use.
 */
const RealDateTimeFormat = Intl.DateTimeFormat;

function DeferredDateTimeFormat(
  ...args: ConstructorParameters<typeof Intl.DateTimeFormat>
): Intl.DateTimeFormat {
  let real: Intl.DateTimeFormat | undefined;
  return new Proxy({} as Intl.DateTimeFormat, {
    get(_target, key) {
      real ??= new RealDateTimeFormat(...args);
      const value: unknown = Reflect.get(real, key, real);
      return typeof value === 'function'
        ? (value as (...a: unknown[]) => unknown).bind(real)
        : value;
    },
  });
}
DeferredDateTimeFormat.supportedLocalesOf = (
  ...args: Parameters<typeof Intl.DateTimeFormat.supportedLocalesOf>
) => RealDateTimeFormat.supportedLocalesOf(...args);
Intl.DateTimeFormat = DeferredDateTimeFormat as unknown as typeof Intl.DateTimeFormat;

/** Intl.DateTimeFormat as it was: once the application's modules have loaded. */
export function restoreIntl(): void {
  Intl.DateTimeFormat = RealDateTimeFormat;
}

import type { ValueTransformer } from 'typeorm';

/** Times are stored as integer milliseconds (both dialects compare them exactly). */
export const millis: ValueTransformer = {
  to: (value: Date | null | undefined) => (value == null ? value : value.getTime()),
  from: (value: string | number | null) => (value == null ? null : new Date(Number(value))),
};

/** PostgreSQL returns bigint columns as strings. */
export const bigintNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | number | null) => (value == null ? null : Number(value)),
};

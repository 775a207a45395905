import { DomainError } from '../common/errors.js';

/** Linking and unlinking Slack users (R46). */
export class SlackError extends DomainError<'BAD_USER_INPUT' | 'FORBIDDEN' | 'NOT_FOUND'> {}

/** The client knows every error code the service can answer with: one class each, with the code's details. */
import * as client from '../src/client/index.js';
import { ERROR_CODES } from '../src/common/errors.js';

test.each(ERROR_CODES)('the client throws a class of its own for %s', (code) => {
  const error = client.errorFromBody({ message: 'refused', extensions: { code } });
  expect(error).toBeInstanceOf(client.PlanfenceError);
  expect(error.constructor).not.toBe(client.PlanfenceError);
  expect(error.code).toBe(code);
  // The class is exported under the name it reports, so callers can catch it by name.
  expect((client as Record<string, unknown>)[error.name]).toBe(error.constructor);
});

test('an answer whose code the client does not know is still a PlanfenceError carrying that code', () => {
  const error = client.errorFromBody({ message: 'new', extensions: { code: 'SOMETHING_NEW' } });
  expect(error.constructor).toBe(client.PlanfenceError);
  expect(error.code).toBe('SOMETHING_NEW');
});

/** Jest for mutation testing: the in-process suites only (the fault harnesses run the compiled service). */
import base from './jest.config.js';

export default { ...base, testPathIgnorePatterns: ['/node_modules/', '/test/fault'] };

// Intl.getCanonicalLocales from the package's module rather than its polyfill-force.js,
// which carries a second copy of the CLDR tables that intl-locale imports from here.
import { getCanonicalLocales } from '@formatjs/intl-getcanonicallocales';

Object.defineProperty(Intl, 'getCanonicalLocales', {
  value: getCanonicalLocales,
  writable: true,
  configurable: true,
  enumerable: false,
});

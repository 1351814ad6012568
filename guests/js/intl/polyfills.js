// The entry of the FormatJS bundle (intl/bundle.mjs), in the order they depend on each
// other: each defines its constructor on the global `Intl` that intl/lazy.js made.
// NumberFormat and DateTimeFormat also replace Number, BigInt and Date's
// toLocale*String.
import './canonical_locales.js';
import '@formatjs/intl-locale/polyfill-force.js';
import '@formatjs/intl-pluralrules/polyfill-force.js';
import '@formatjs/intl-numberformat/polyfill-force.js';
import '@formatjs/intl-datetimeformat/polyfill-force.js';
import '@formatjs/intl-relativetimeformat/polyfill-force.js';

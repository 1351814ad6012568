// `Intl` and the toLocale*String methods for the JavaScript guest, whose engine is built
// without ICU (intl/README.md says what is offered and what is not).
//
// Nothing is installed while the component is built: `globalThis.Intl` is a getter, and
// the methods that format (toLocaleString and friends, localeCompare) are stand-ins; the
// first use of any of them in a run installs the polyfills (intl/bundle.mjs), and each
// locale's data when a call first names that language. A run that never formats pays
// nothing, and one that does pays for what it used.
import {
  LOCALES,
  LOCALE_DATA,
  collation,
  polyfills as polyfillSource,
  timeZones,
} from '../node_modules/.cache/wasmbox-intl/intl.js';
import { installCollator } from './collator.js';

const FORMATTERS = ['PluralRules', 'NumberFormat', 'DateTimeFormat', 'RelativeTimeFormat'];
const hidden = (value) => ({ value, writable: true, configurable: true, enumerable: false });

/** Sets up `Intl` to be installed on first use, on `global` (the code's realm). */
export function installIntlOnFirstUse(global) {
  const TypedArray = Object.getPrototypeOf(global.Int8Array.prototype);
  // [object, method, length]: what formats, and is installed on first use.
  const methods = [
    [global.Number.prototype, 'toLocaleString', 0],
    [global.BigInt.prototype, 'toLocaleString', 0],
    [global.Date.prototype, 'toLocaleString', 0],
    [global.Date.prototype, 'toLocaleDateString', 0],
    [global.Date.prototype, 'toLocaleTimeString', 0],
    [global.Array.prototype, 'toLocaleString', 0],
    [TypedArray, 'toLocaleString', 0],
    [global.String.prototype, 'localeCompare', 1],
  ];
  let Intl;
  const install = () => {
    Intl ??= installIntl(global, TypedArray);
    return Intl;
  };
  Object.defineProperty(global, 'Intl', {
    configurable: true,
    enumerable: false,
    get: install,
    set(value) {
      Object.defineProperty(global, 'Intl', hidden(value));
    },
  });
  for (const [object, name, length] of methods) {
    const standIn = {
      [name](...args) {
        install();
        return object[name].apply(this, args);
      },
    }[name];
    Object.defineProperty(standIn, 'length', { value: length });
    Object.defineProperty(object, name, hidden(standIn));
  }
}

function installIntl(global, TypedArray) {
  const Intl = {};
  Object.defineProperty(Intl, Symbol.toStringTag, { value: 'Intl', configurable: true });
  Object.defineProperty(global, 'Intl', hidden(Intl));
  new Function(polyfillSource())();

  const polyfills = FORMATTERS.map((name) => Intl[name]);
  const loaded = new Set();
  const load = (locale) => {
    if (loaded.has(locale)) return;
    loaded.add(locale);
    const [plural, ...formats] = LOCALE_DATA[locale]();
    polyfills[0].__addLocaleData(plural);
    formats.forEach((json, i) => polyfills[i + 1].__addLocaleData(JSON.parse(json)));
  };
  // Every locale of each language a call names (en-AU loads en and en-GB, among which
  // FormatJS picks as it would with all of them), and the default, LOCALES[0], which
  // FormatJS takes to be the first one it was given.
  const languages = new Map();
  for (const locale of LOCALES) {
    const language = locale.split('-')[0];
    languages.set(language, [...(languages.get(language) ?? []), locale]);
  }
  load(LOCALES[0]);
  const loadFor = (locales) => {
    if (locales === undefined) return;
    const tags = typeof locales === 'string' ? [locales] : Array.from(Object(locales));
    for (const tag of tags) {
      const language = typeof tag === 'string' ? tag.split(/[-_]/)[0].toLowerCase() : '';
      for (const locale of languages.get(language) ?? []) load(locale);
    }
  };

  // The time zones (all of IANA's, from FormatJS's add-all-tz.js) when a call first names
  // one: the default, UTC, needs none. Each zone's transitions are unpacked on first use.
  const DateTimeFormat = Intl.DateTimeFormat;
  let zonesLoaded = false;
  const loadZonesFor = (options) => {
    if (zonesLoaded || options === undefined || options === null) return;
    const zone = Object(options).timeZone;
    if (zone === undefined || String(zone).toUpperCase() === 'UTC') return;
    zonesLoaded = true;
    DateTimeFormat.tzData = unpackedOnFirstUse(JSON.parse(timeZones()));
  };

  for (const name of FORMATTERS) {
    const Polyfill = Intl[name];
    const Formatter = {
      [name]: function (locales, options) {
        loadFor(locales);
        if (name === 'DateTimeFormat') loadZonesFor(options);
        return new.target
          ? Reflect.construct(Polyfill, [locales, options], new.target)
          : Polyfill(locales, options);
      },
    }[name];
    Object.defineProperty(Formatter, 'length', { value: 0 });
    Object.defineProperty(Formatter, 'prototype', { value: Polyfill.prototype, writable: false });
    Object.defineProperty(Polyfill.prototype, 'constructor', hidden(Formatter));
    const supportedLocalesOf = {
      supportedLocalesOf(locales, options) {
        loadFor(locales);
        return Polyfill.supportedLocalesOf(locales, options);
      },
    }.supportedLocalesOf;
    Object.defineProperty(supportedLocalesOf, 'length', { value: 1 });
    Object.defineProperty(Formatter, 'supportedLocalesOf', hidden(supportedLocalesOf));
    Object.defineProperty(Intl, name, hidden(Formatter));
  }

  // Number, BigInt and Date's toLocale*String make a formatter per call, as ECMA-402
  // says, and making one is dear here (a DateTimeFormat matches the options against
  // every pattern of its locale): formatters made for plain arguments are kept for the
  // run, which a loop formatting many dates would otherwise pay on every call.
  const formatters = new Map();
  const formatter = (key, make) => {
    let made = key === undefined ? undefined : formatters.get(key);
    if (made === undefined) {
      made = make();
      if (key !== undefined) {
        if (formatters.size >= 64) formatters.clear();
        formatters.set(key, made);
      }
    }
    return made;
  };
  const numberValue = (valueOf) => (value) => valueOf.call(value); // TypeError unless a number
  const methods = [
    [global.Number.prototype, 'toLocaleString', numberValue(global.Number.prototype.valueOf), Intl.NumberFormat],
    [global.BigInt.prototype, 'toLocaleString', numberValue(global.BigInt.prototype.valueOf), Intl.NumberFormat],
  ];
  const dateValue = numberValue(global.Date.prototype.getTime);
  for (const [name, required, defaults] of [
    ['toLocaleString', 'any', 'all'],
    ['toLocaleDateString', 'date', 'date'],
    ['toLocaleTimeString', 'time', 'time'],
  ]) {
    methods.push([global.Date.prototype, name, dateValue, Intl.DateTimeFormat, required, defaults]);
  }
  for (const [object, name, thisValue, Formatter, required, defaults] of methods) {
    const method = {
      [name](locales, options) {
        const value = thisValue(this);
        if (required === undefined) {
          return formatter(cacheKey('NumberFormat', locales, options), () => new Formatter(locales, options)).format(value);
        }
        if (Number.isNaN(value)) return 'Invalid Date';
        const key = cacheKey(`DateTimeFormat ${name}`, locales, options);
        return formatter(key, () => new Formatter(locales, toDateTimeOptions(options, required, defaults))).format(value);
      },
    }[name];
    Object.defineProperty(method, 'length', { value: 0 });
    Object.defineProperty(object, name, hidden(method));
  }

  // ECMA-402's Array.prototype.toLocaleString passes locales and options on to each
  // element; SpiderMonkey's passes nothing without ICU. The separator is ",", as in V8
  // and SpiderMonkey with ICU. An array met again while it is being joined gives "".
  const joining = new Set();
  const arrayToLocaleString = (check) => ({
    toLocaleString(locales, options) {
      const array = check(this);
      if (joining.has(array)) return '';
      joining.add(array);
      try {
        const length = Math.min(Math.max(Math.trunc(Number(array.length)) || 0, 0), Number.MAX_SAFE_INTEGER);
        let out = '';
        for (let i = 0; i < length; i++) {
          if (i > 0) out += ',';
          const element = array[i];
          if (element !== undefined && element !== null) out += String(element.toLocaleString(locales, options));
        }
        return out;
      } finally {
        joining.delete(array);
      }
    },
  }).toLocaleString;
  const toObject = (value) => {
    if (value === undefined || value === null) throw new TypeError('Array.prototype.toLocaleString called on null or undefined');
    return Object(value);
  };
  const typedArrayLength = Object.getOwnPropertyDescriptor(TypedArray, 'length').get;
  const typedArray = (value) => {
    typedArrayLength.call(value); // throws a TypeError unless value is a typed array
    return value;
  };
  for (const [object, method] of [[global.Array.prototype, arrayToLocaleString(toObject)], [TypedArray, arrayToLocaleString(typedArray)]]) {
    Object.defineProperty(method, 'length', { value: 0 });
    Object.defineProperty(object, 'toLocaleString', hidden(method));
  }

  const localeCompare = installCollator(Intl, LOCALES, collation, (locales) => Intl.getCanonicalLocales(locales));
  Object.defineProperty(localeCompare, 'length', { value: 1 });
  Object.defineProperty(global.String.prototype, 'localeCompare', hidden(localeCompare));
  return Intl;
}

// A key for a formatter made from `locales` and `options`, or undefined unless both are
// plain: a tag or a list of tags, and an object of primitive data properties.
function cacheKey(kind, locales, options) {
  let tags;
  if (locales === undefined) tags = null;
  else if (typeof locales === 'string') tags = locales;
  else if (Array.isArray(locales) && locales.every((tag) => typeof tag === 'string')) tags = locales;
  else return undefined;
  if (options === undefined) return JSON.stringify([kind, tags]);
  if (options === null || typeof options !== 'object' || Object.getPrototypeOf(options) !== Object.prototype) return undefined;
  const entries = [];
  for (const key of Reflect.ownKeys(options)) {
    const property = Object.getOwnPropertyDescriptor(options, key);
    const value = property.value;
    if (typeof key !== 'string' || !('value' in property)) return undefined;
    if (!['string', 'number', 'boolean', 'undefined'].includes(typeof value) && value !== null) return undefined;
    entries.push([key, typeof value, String(value)]);
  }
  return JSON.stringify([kind, tags, entries]);
}

// ECMA-402's ToDateTimeOptions (what Date's toLocale*String ask of a DateTimeFormat).
function toDateTimeOptions(options, required, defaults) {
  options = Object.create(options === undefined ? null : Object(options));
  let needDefaults = true;
  if (required === 'date' || required === 'any') {
    for (const p of ['weekday', 'year', 'month', 'day']) if (options[p] !== undefined) needDefaults = false;
  }
  if (required === 'time' || required === 'any') {
    for (const p of ['dayPeriod', 'hour', 'minute', 'second', 'fractionalSecondDigits']) if (options[p] !== undefined) needDefaults = false;
  }
  const { dateStyle, timeStyle } = options;
  if (dateStyle !== undefined || timeStyle !== undefined) needDefaults = false;
  if (required === 'date' && timeStyle !== undefined) throw new TypeError('toLocaleDateString does not take timeStyle');
  if (required === 'time' && dateStyle !== undefined) throw new TypeError('toLocaleTimeString does not take dateStyle');
  if (needDefaults && (defaults === 'date' || defaults === 'all')) for (const p of ['year', 'month', 'day']) options[p] = 'numeric';
  if (needDefaults && (defaults === 'time' || defaults === 'all')) for (const p of ['hour', 'minute', 'second']) options[p] = 'numeric';
  return options;
}

// FormatJS's time-zone table (DateTimeFormat.tzData) with each zone's transitions
// unpacked when first read, as its own `unpack` does for all of them at once.
function unpackedOnFirstUse({ abbrvs, offsets, zones }) {
  const abbreviations = abbrvs.split('|');
  const offsetValues = offsets.split('|').map((n) => parseInt(n, 36));
  const table = {};
  for (const packed of zones) {
    const bar = packed.indexOf('|');
    const zone = packed.slice(0, bar);
    Object.defineProperty(table, zone, {
      configurable: true,
      enumerable: true,
      get() {
        const transitions = packed.slice(bar + 1).split('|').map((entry) => {
          const [time, abbreviation, offset, dst] = entry.split(',');
          return [time === '' ? -Infinity : parseInt(time, 36), abbreviations[+abbreviation], offsetValues[+offset], dst === '1'];
        });
        Object.defineProperty(table, zone, { value: transitions, enumerable: true });
        return transitions;
      },
    });
  }
  return table;
}

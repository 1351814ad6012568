// Intl.Collator for the JavaScript guest, which has no ICU; no FormatJS package offers
// one. The weights come from tables computed at build time from Node's ICU
// (intl/collation_tables.mjs says what they hold): for the characters they cover, this
// compares as ICU does at each sensitivity; its limits are in intl/README.md.

const HIGHEST_LISTED = 0x110000; // primary weights of unlisted characters start above

function parseTable({ classes, ignorable, expansions }) {
  const weights = new Map(); // character -> [primary, secondary, tertiary]
  let primary = 0;
  for (const groups of classes.split('\u0002')) {
    primary += 1;
    groups.split('\u0001').forEach((group, secondary) => {
      let tertiary = 0;
      for (const ch of group) weights.set(ch, [primary, secondary, tertiary++]);
    });
  }
  let rank = 0;
  for (const ch of ignorable) weights.set(ch, [0, 1000 + rank++, 0]);
  for (const [ch, [expansion, level]] of Object.entries(expansions)) {
    // Equal to its expansion at the base level; after it, and after every accented form
    // of it, at the accent level (`level` 2: æ) or only at the third (ß).
    weights.set(ch, [...expansion].map((c, i) => {
      const [p, s, t] = weights.get(c);
      return level === 2 && i === 0 ? [p, s + 1000, t] : [p, s, t + 1000];
    }));
  }
  const zero = weights.get('0')[0];
  return { weights, zero };
}

let tables;
function tablesFor(locale, load) {
  if (!tables) {
    const { root, tailored, punctuation } = JSON.parse(load());
    tables = { root, tailored, parsed: new Map(), punctuation: new Set(punctuation) };
  }
  const key = Object.hasOwn(tables.tailored, locale) ? locale : 'root';
  if (!tables.parsed.has(key)) tables.parsed.set(key, parseTable(key === 'root' ? tables.root : tables.tailored[key]));
  return tables.parsed.get(key);
}

const isDigit = (ch) => ch >= '0' && ch <= '9';

// A string's collation elements: [primary, secondary, tertiary, isUpper] per element.
function elements(string, table, options) {
  const out = [];
  const chars = [...string];
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i];
    if (options.numeric && isDigit(ch)) {
      let j = i;
      while (j < chars.length && isDigit(chars[j])) j++;
      let digits = chars.slice(i, j).join('').replace(/^0+/, '');
      // A number compares by its count of significant digits, then its digits.
      out.push([table.zero, 0, 0, false], [table.zero + digits.length / 1e6, 0, 0, false]);
      for (const d of digits) out.push([table.weights.get(d)[0], 0, 0, false]);
      i = j - 1;
      digits = '';
      continue;
    }
    if (options.ignorePunctuation && tables.punctuation.has(ch)) continue;
    const w = table.weights.get(ch);
    const upper = ch !== ch.toLowerCase();
    if (w === undefined) {
      out.push([HIGHEST_LISTED + ch.codePointAt(0), 0, 0, upper]);
    } else if (Array.isArray(w[0])) {
      for (const e of w) out.push([...e, upper]);
    } else {
      out.push([...w, upper]);
    }
  }
  return out;
}

function compareLevel(a, b, weight) {
  // Elements with no weight at this level (0 at the primary level) are skipped.
  const wa = a.map(weight).filter((w) => w !== null);
  const wb = b.map(weight).filter((w) => w !== null);
  const n = Math.min(wa.length, wb.length);
  for (let i = 0; i < n; i++) if (wa[i] !== wb[i]) return wa[i] < wb[i] ? -1 : 1;
  return wa.length === wb.length ? 0 : wa.length < wb.length ? -1 : 1;
}

function compareStrings(x, y, table, options) {
  if (x === y) return 0;
  const a = elements(x, table, options);
  const b = elements(y, table, options);
  const primary = compareLevel(a, b, (e) => (e[0] === 0 ? null : e[0]));
  if (primary !== 0 || options.sensitivity === 'base') return primary;
  if (options.sensitivity !== 'case') {
    const secondary = compareLevel(a, b, (e) => e[1]);
    if (secondary !== 0 || options.sensitivity === 'accent') return secondary;
  }
  const upperFirst = options.caseFirst === 'upper';
  const caseLevel = compareLevel(a, b, (e) => (e[3] === upperFirst ? 0 : 1));
  if (options.sensitivity === 'case' || (caseLevel !== 0 && options.caseFirst !== 'false')) return caseLevel;
  return compareLevel(a, b, (e) => e[2]);
}

const OPTIONS = {
  usage: ['sort', 'search'],
  sensitivity: ['base', 'accent', 'case', 'variant'],
  caseFirst: ['upper', 'lower', 'false'],
};

function getOption(options, name, allowed, fallback) {
  let value = options[name];
  if (value === undefined) return fallback;
  if (allowed === Boolean) return Boolean(value);
  value = String(value);
  if (!allowed.includes(value)) throw new RangeError(`Value ${value} out of range for Intl.Collator options property ${name}`);
  return value;
}

/**
 * Makes `Intl.Collator` (on `Intl`) and `String.prototype.localeCompare` from the tables
 * `load` answers (JSON text), for `locales` (the locales with data). `canonicalize` is
 * `Intl.getCanonicalLocales`.
 */
export function installCollator(Intl, locales, load, canonicalize) {
  const slots = new WeakMap();

  // BCP 47 lookup (RFC 4647 3.4) among the locales with data; the default is the first.
  function lookup(tag) {
    const bare = tag.replace(/-u(-[a-z0-9]{2,8})+$/i, '').replace(/-x-.*$/i, '');
    for (let candidate = bare; candidate; candidate = candidate.replace(/-?[^-]*$/, '')) {
      const found = locales.find((l) => l.toLowerCase() === candidate.toLowerCase());
      if (found) return { locale: found, extensions: tag.slice(bare.length) };
    }
    return undefined;
  }
  const resolveLocale = (requested) => requested.map(lookup).find(Boolean) ?? { locale: locales[0], extensions: '' };

  function unicodeKeyword(extensions, key) {
    const match = new RegExp(`-u(?:-[a-z0-9]{2,8})*?-${key}(?:-([a-z0-9]{3,8}))?(?=-|$)`, 'i').exec(extensions);
    return match ? (match[1] ?? 'true').toLowerCase() : undefined;
  }

  const Collator = function Collator(locales, options) {
    if (!new.target) return new Collator(locales, options);
    const requested = canonicalize(locales);
    options = options === undefined ? {} : Object(options);
    const usage = getOption(options, 'usage', OPTIONS.usage, 'sort');
    getOption(options, 'localeMatcher', ['lookup', 'best fit'], 'best fit');
    getOption(options, 'collation', { includes: () => true }, undefined);
    let numeric = getOption(options, 'numeric', Boolean, undefined);
    let caseFirst = getOption(options, 'caseFirst', OPTIONS.caseFirst, undefined);
    const { locale, extensions } = resolveLocale(requested);
    const kn = unicodeKeyword(extensions, 'kn');
    const kf = unicodeKeyword(extensions, 'kf');
    let resolved = locale;
    if (numeric === undefined && kn !== undefined) {
      numeric = kn === 'true';
      resolved += numeric ? '-u-kn' : '-u-kn-false';
    }
    if (caseFirst === undefined && kf !== undefined && OPTIONS.caseFirst.includes(kf)) {
      caseFirst = kf;
      resolved += `${resolved.includes('-u-') ? '' : '-u'}-kf-${kf}`;
    }
    const sensitivity = getOption(options, 'sensitivity', OPTIONS.sensitivity, 'variant');
    const ignorePunctuation = getOption(options, 'ignorePunctuation', Boolean, false);
    slots.set(this, {
      locale: resolved,
      usage,
      sensitivity,
      ignorePunctuation,
      collation: 'default',
      numeric: numeric ?? false,
      caseFirst: caseFirst ?? 'false',
      table: tablesFor(locale, load),
    });
  };
  const slotsOf = (collator, method) => {
    const s = slots.get(collator);
    if (!s) throw new TypeError(`Method Intl.Collator.prototype.${method} called on incompatible receiver`);
    return s;
  };
  Object.defineProperty(Collator, 'length', { value: 0 });
  Object.defineProperty(Collator, 'supportedLocalesOf', {
    configurable: true,
    writable: true,
    value: function supportedLocalesOf(requested) {
      return canonicalize(requested).filter((tag) => lookup(tag) !== undefined);
    },
  });
  const bound = new WeakMap();
  Object.defineProperties(Collator.prototype, {
    compare: {
      configurable: true,
      get() {
        const s = slotsOf(this, 'compare');
        if (!bound.has(this)) {
          bound.set(this, (x, y) => compareStrings(String(x), String(y), s.table, s));
        }
        return bound.get(this);
      },
    },
    resolvedOptions: {
      configurable: true,
      writable: true,
      value: function resolvedOptions() {
        const { locale, usage, sensitivity, ignorePunctuation, collation, numeric, caseFirst } = slotsOf(this, 'resolvedOptions');
        return { locale, usage, sensitivity, ignorePunctuation, collation, numeric, caseFirst };
      },
    },
    [Symbol.toStringTag]: { configurable: true, value: 'Intl.Collator' },
  });
  Object.defineProperty(Intl, 'Collator', { configurable: true, writable: true, value: Collator });

  let plain;
  return {
    localeCompare(that, locales, options) {
      if (this === null || this === undefined) {
        throw new TypeError('String.prototype.localeCompare called on null or undefined');
      }
      const collator = locales === undefined && options === undefined
        ? (plain ??= new Collator())
        : new Collator(locales, options);
      return collator.compare(String(this), String(that));
    },
  }.localeCompare;
}

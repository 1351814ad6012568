// The tables of the guest's Intl.Collator (intl/collator.js), computed at build time from
// the ICU inside Node: the guest's engine has no ICU and no String.prototype.normalize,
// and no FormatJS package implements a collator.
//
// For a fixed set of characters (RANGES) each table lists, in the locale's order, the
// primary classes (characters equal at sensitivity "base"), each split into accent
// groups (equal at "accent"), each a string of characters in full-strength order. The
// guest turns the position of a character into its weights at the three levels, which
// is what a UCA collation compares, restricted to one weight per character. Characters
// that ICU expands to several (ß = ss, æ = ae) are listed as expansions; characters that
// are ignorable at the base level (combining marks) get an accent weight only.
// Characters outside RANGES sort after all of these, by code point: Han ideographs come
// last, in code point order (ICU's root order; Chinese and Japanese tailorings do not).

// Basic Latin, Latin-1, Latin Extended-A and -B, combining diacritics, Greek, Cyrillic,
// Latin Extended Additional (Vietnamese), general punctuation, currency signs, kana,
// fullwidth forms.
const RANGES = [
  [0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x1e00, 0x1eff], [0x2010, 0x205e], [0x20a0, 0x20c0], [0x3041, 0x30ff], [0xfb00, 0xfb06], [0xff01, 0xff5e],
];

// Candidates for expansions besides compatibility decompositions (NFKD): kept only where
// ICU agrees at sensitivity "base".
const EXPANSIONS = { 'ß': 'ss', 'ẞ': 'SS', 'æ': 'ae', 'Æ': 'AE', 'œ': 'oe', 'Œ': 'OE', 'ǝ': 'e' };

function characters() {
  const chars = [];
  for (const [from, to] of RANGES) {
    for (let cp = from; cp <= to; cp++) {
      const ch = String.fromCodePoint(cp);
      if (/\p{Cn}|\p{Cs}|\p{Co}/u.test(ch)) continue; // unassigned
      chars.push(ch);
    }
  }
  return chars;
}

function table(locale, chars) {
  const full = new Intl.Collator(locale, { usage: 'sort' });
  const base = new Intl.Collator(locale, { sensitivity: 'base' });
  const accent = new Intl.Collator(locale, { sensitivity: 'accent' });
  const expansions = {};
  const ignorable = [];
  const ordered = [];
  for (const ch of chars) {
    if (full.compare(ch, '') === 0) continue; // ignorable at every level: dropped
    if (base.compare(ch, '') === 0) {
      ignorable.push(ch);
      continue;
    }
    const candidate = EXPANSIONS[ch]
      ?? ch.normalize('NFKD').replace(/\p{M}/gu, '');
    if ([...candidate].length > 1 && base.compare(ch, candidate) === 0
        && [...candidate].every((c) => chars.includes(c))) {
      // The level at which it differs from its expansion: æ is after ae (and after áe)
      // at the accent level, ß after ss only at the third.
      expansions[ch] = [candidate, accent.compare(ch, candidate) === 0 ? 3 : 2];
      continue;
    }
    ordered.push(ch);
  }
  ordered.sort((a, b) => full.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0));
  ignorable.sort((a, b) => full.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0));
  const classes = [];
  let previous;
  for (const ch of ordered) {
    if (previous === undefined || base.compare(previous, ch) !== 0) {
      classes.push([ch]);
    } else {
      const groups = classes[classes.length - 1];
      if (accent.compare(previous, ch) !== 0) groups.push(ch);
      else groups[groups.length - 1] += ch;
    }
    previous = ch;
  }
  return {
    classes: classes.map((groups) => groups.join('\u0001')).join('\u0002'),
    ignorable: ignorable.join(''),
    expansions,
  };
}

function punctuation(chars) {
  const ignoring = new Intl.Collator('en', { ignorePunctuation: true });
  return chars.filter((ch) => ignoring.compare(ch, '') === 0 && new Intl.Collator('en').compare(ch, '') !== 0).join('');
}

/** The root table, and each locale's where it differs from the root's. */
export function collationTables(locales) {
  const chars = characters();
  const root = table('und', chars);
  const tailored = {};
  const rootText = JSON.stringify(root);
  for (const locale of locales) {
    const own = table(locale, chars);
    if (JSON.stringify(own) !== rootText) tailored[locale] = own;
  }
  return { root, tailored, punctuation: punctuation(chars) };
}

// Appended by patch.mjs to the bindings, whose code runs in a realm of its own (the
// code's realm is their `contentGlobal`); runner.js does the same for the code's realm.
//
// SpiderMonkey makes a standard class (its constructor, and its prototype with every
// method) the first time a realm uses it, and every run starts again from the snapshot
// taken after this script ran. So each class a run touched was made again in every run:
// the typed arrays the bindings move strings through, and SavedFrame, which the first
// promise of a run needs for its async stack. Those were a large part of a trivial
// run (docs/performance.md, "Session 7"). Made here, they are in the snapshot.
for (const name of Object.getOwnPropertyNames(globalThis)) {
  try {
    void globalThis[name];
  } catch {
    // an accessor that refuses at build time: nothing to make
  }
}
// SavedFrame is not a global; the first captured stack makes it.
void (function captureStack() { return new Error(); })();
